//! ZFP filter (id 32013, the H5Z-ZFP plugin, as hdf5plugin ships it): decoded with the
//! pure Rust `zfp-rs` crate, for every field the plugin writes (int32, int64, float and
//! double scalars, 1 to 4 dimensions, fixed-rate, fixed-precision, fixed-accuracy,
//! reversible and expert modes).
//!
//! # Client data
//!
//! `cd[0]` is a version word (ZFP library, codec and plugin versions), unused here. The
//! plugin writes the field's ZFP header into the words after it: it opens a ZFP bit stream
//! on the memory of `cd[1..]` and writes the magic `"zfp"`, the codec version, the field
//! metadata (scalar type, dimensions, the chunk's sizes with unit dimensions dropped, x the
//! fastest-varying, i.e. the last C dimension) and the compression mode. libhdf5 then
//! stores each word as a little-endian number.
//!
//! The plugin refuses to work with a ZFP library whose bit stream words are not single
//! bytes (hdf5plugin's are bytes), so the header is a plain byte sequence in the writer's
//! memory:
//!
//! - written on a little-endian host, the words' little-endian bytes are the header;
//! - written on a big-endian host, each word's bytes come in the other order: the header is
//!   the words' *big-endian* bytes. The magic is only found after swapping each word.
//!
//! A ZFP library built with 64-bit stream words on a big-endian host leaves the halves of
//! each 64-bit header word swapped, and H5Z-ZFP then keeps too few words to hold the mode:
//! that case is recognised and reported as undecodable.
//!
//! # Chunks
//!
//! A chunk holds nothing but the compressed stream of the chunk's field. With byte-sized
//! stream words it is the same byte sequence whatever the writer's byte order, and it need
//! not fill a whole number of 64-bit words. The crate reads 64-bit words, least significant
//! bit first, so the bytes are packed into words little-endian (on any host). It reports a
//! stream as truncated when it loads a word past its buffer, so the chunk is put at the end
//! of the word buffer (zero bytes in front, the stream starting after them): a stream
//! needing even one bit past the chunk's last byte is an error.
//!
//! The decoded values are numbers in the writer's byte order, which is the dataset's: the
//! plugin refuses datatypes not in the writer's native order, and its reader byte-swaps
//! the values when it had to swap the header. So the output is little-endian for a header
//! read as is and big-endian for a swapped one.
//!
//! # Limits
//!
//! The header's field (element size times its dimensions) must fit the stage's output
//! limit before anything is allocated. The crate's decoder allocates nothing itself, makes
//! one pass over the field's blocks, each of bounded size, and is documented and tested
//! never to panic (it returns errors for any header or stream), so nothing here catches
//! panics.

use zfp_rs::{
    ZfpBitStreamRef, ZfpConfig, ZfpFieldMetadata, ZfpFieldMut, ZfpHeaderMask, ZfpScalarType,
};

use super::Stage;

/// The ZFP codec version the header must name.
const CODEC: u8 = 5;
/// Most header words read: a full header is at most 148 bits.
const HEADER_WORDS: usize = 5;

/// Byte order of the host that wrote the data: that of the header's words and of the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

/// What the client data say about the chunks.
#[derive(Debug)]
struct Header {
    order: Order,
    meta: ZfpFieldMetadata,
    config: ZfpConfig,
}

/// The header bytes of the words `cd[1..]` as a host of byte order `order` wrote them.
fn header_bytes(words: &[u32], order: Order) -> Vec<u8> {
    words
        .iter()
        .take(HEADER_WORDS)
        .flat_map(|w| match order {
            Order::Little => w.to_le_bytes(),
            Order::Big => w.to_be_bytes(),
        })
        .collect()
}

/// `bytes` as 64-bit little-endian stream words, the last one zero-padded.
fn stream_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

/// `bytes` as 64-bit little-endian stream words preceded by zero bytes so that they end on a
/// word boundary, and the bit where they start. The crate reports a stream as truncated
/// when it loads a word past the buffer, so this makes any read past the chunk's last byte
/// an error.
fn end_aligned_words(bytes: &[u8]) -> (Vec<u64>, u64) {
    let pad = bytes.len().wrapping_neg() % 8;
    let (head, rest) = bytes.split_at((8 - pad) % 8);
    let mut words = Vec::with_capacity(bytes.len().div_ceil(8));
    if !head.is_empty() {
        let mut w = [0u8; 8];
        w[pad..].copy_from_slice(head);
        words.push(u64::from_le_bytes(w));
    }
    words.extend(rest.chunks_exact(8).map(|c| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        u64::from_le_bytes(w)
    }));
    (words, pad as u64 * 8)
}

fn read_header(cd: &[u32]) -> Result<Header, String> {
    let words = cd
        .get(1..)
        .filter(|w| !w.is_empty())
        .ok_or("client data missing")?;
    let found = [Order::Little, Order::Big]
        .into_iter()
        .map(|order| (order, header_bytes(words, order)))
        .find(|(_, bytes)| bytes.starts_with(b"zfp"));
    let Some((order, bytes)) = found else {
        // A 64-bit stream word written big-endian puts its low half, which starts with
        // the magic, in the second client data word.
        if words
            .get(1)
            .is_some_and(|w| w.to_le_bytes().starts_with(b"zfp"))
        {
            return Err(concat!(
                "ZFP header written on a big-endian host by a ZFP library with 64-bit ",
                "stream words: the client data lack part of it"
            )
            .into());
        }
        return Err("client data do not hold a ZFP header".into());
    };
    let codec = bytes[3];
    if codec != CODEC {
        return Err(format!("ZFP codec version {codec}"));
    }
    let stream = stream_words(&bytes);
    let header = ZfpBitStreamRef::from_words(&stream)
        .read_header(ZfpHeaderMask::FULL)
        .map_err(|e| e.to_string())?;
    if header.bits_read > bytes.len() * 8 {
        return Err("ZFP header truncated".into());
    }
    match (header.metadata, header.config) {
        (Some(meta), Some(config)) => Ok(Header {
            order,
            meta,
            config,
        }),
        _ => Err("ZFP header incomplete".into()),
    }
}

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let header = read_header(stage.cd)?;
    let dims = header.meta.dims;
    let count = dims
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |a, &d| a.checked_mul(d));
    let count = count
        .filter(|&n| {
            n.checked_mul(header.meta.scalar_type.size())
                .is_some_and(|bytes| bytes <= stage.limit)
        })
        .ok_or("ZFP field larger than the chunk")?;
    let (words, start) = end_aligned_words(input);
    let mut stream = ZfpBitStreamRef::from_words(&words);
    stream.seek_read(start);
    let big = header.order == Order::Big;
    // Decode into a vector of the scalar type, then lay the numbers out in the writer's order.
    macro_rules! decode_as {
        ($t:ty) => {{
            let mut values = vec![<$t>::default(); count];
            let mut field = ZfpFieldMut::new(&mut values, dims).map_err(|e| e.to_string())?;
            stream
                .decompress(&header.config, &mut field)
                .map_err(|e| format!("ZFP stream: {e}"))?;
            let mut out = Vec::with_capacity(count * size_of::<$t>());
            if big {
                values
                    .iter()
                    .for_each(|v| out.extend_from_slice(&v.to_be_bytes()));
            } else {
                values
                    .iter()
                    .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            out
        }};
    }
    Ok(match header.meta.scalar_type {
        ZfpScalarType::I32 => decode_as!(i32),
        ZfpScalarType::I64 => decode_as!(i64),
        ZfpScalarType::F32 => decode_as!(f32),
        ZfpScalarType::F64 => decode_as!(f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The H5Z-ZFP client data of a 16 x 16 float chunk in fixed-accuracy mode (2^-7).
    const ACCURACY_CD: [u32; 4] = [269504785, 91252346, 4026532086, 3401580544];
    /// A 16 x 16 double chunk in expert mode (long mode word: 148 header bits, 5 words).
    const EXPERT_CD: [u32; 6] = [
        269504785, 91252346, 4026532087, 4293918720, 1204781056, 527207,
    ];
    /// The mode word of reversible compression.
    const REVERSIBLE: u64 = 2176;

    /// Client data of a little-endian writer for field metadata `meta` and a 12-bit mode.
    fn client_data(meta: u64, mode: u64) -> [u32; 4] {
        let bits = u128::from(u32::from_le_bytes(*b"zfp\x05"))
            | (u128::from(meta & ((1 << 52) - 1)) << 32)
            | (u128::from(mode & 0xfff) << 84);
        let mut cd = [ACCURACY_CD[0], 0, 0, 0];
        for (i, w) in cd[1..].iter_mut().enumerate() {
            *w = (bits >> (32 * i)) as u32;
        }
        cd
    }

    /// Field metadata: scalar type (1 int32, 2 int64, 3 float, 4 double) and sizes.
    fn meta(ty: u64, dims: &[u64]) -> u64 {
        let width = [48, 24, 16, 12][dims.len() - 1];
        let sizes = dims
            .iter()
            .enumerate()
            .fold(0, |a, (i, &n)| a | ((n - 1) << (width * i)));
        (ty - 1) | ((dims.len() as u64 - 1) << 2) | (sizes << 4)
    }

    /// The client data a big-endian writer leaves: every header word's bytes reversed.
    fn big_endian(cd: &[u32]) -> Vec<u32> {
        let mut be = cd.to_vec();
        be[1..].iter_mut().for_each(|w| *w = w.swap_bytes());
        be
    }

    fn stage(cd: &[u32], limit: usize) -> Stage<'_> {
        Stage { cd, limit }
    }

    #[test]
    fn little_endian_header() {
        let h = read_header(&ACCURACY_CD).unwrap();
        assert_eq!(h.order, Order::Little);
        assert_eq!(h.meta.scalar_type, ZfpScalarType::F32);
        assert_eq!(h.meta.dims, [16, 16, 0, 0]);
        assert_eq!(h.config.accuracy(), Some(2f64.powi(-7)));
        assert_eq!(
            client_data(meta(3, &[16, 16]), 2048 + 128 + 1 + 1067),
            ACCURACY_CD
        );
        let h = read_header(&EXPERT_CD).unwrap();
        assert_eq!(h.meta.scalar_type, ZfpScalarType::F64);
        assert_eq!((h.config.min_bits(), h.config.max_bits()), (1, 4000));
        assert_eq!((h.config.max_prec(), h.config.min_exp()), (30, -20));
    }

    #[test]
    fn big_endian_header_is_found_after_swapping_each_word() {
        for cd in [&ACCURACY_CD[..], &EXPERT_CD[..]] {
            let le = read_header(cd).unwrap();
            let be = read_header(&big_endian(cd)).unwrap();
            assert_eq!(be.order, Order::Big);
            assert_eq!((be.meta, be.config), (le.meta, le.config));
        }
    }

    #[test]
    fn sixty_four_bit_words_from_a_big_endian_host_are_reported() {
        // A 64-bit word stored big-endian: its high half first, then its low half, which
        // holds the magic.
        let cd = [ACCURACY_CD[0], ACCURACY_CD[2], ACCURACY_CD[1], 0];
        let e = read_header(&cd).unwrap_err();
        assert!(e.contains("64-bit"), "{e}");
    }

    #[test]
    fn bad_headers() {
        for cd in [&[0, 1, 2, 3][..], &[0], &[]] {
            assert!(read_header(cd).is_err(), "{cd:?}");
        }
        // Another codec version.
        let mut codec = ACCURACY_CD;
        codec[1] = (codec[1] & 0x00ff_ffff) | (4 << 24);
        assert_eq!(read_header(&codec).unwrap_err(), "ZFP codec version 4");
        // Cut short: the mode, or the second half of a long mode, is missing.
        assert!(read_header(&ACCURACY_CD[..3]).is_err());
        assert!(read_header(&EXPERT_CD[..5]).is_err());
    }

    #[test]
    fn chunks_end_on_a_word_boundary() {
        assert_eq!(end_aligned_words(&[]), (vec![], 0));
        let bytes: Vec<u8> = (1..=11).collect();
        let (words, start) = end_aligned_words(&bytes);
        assert_eq!(start, 5 * 8);
        assert_eq!(words, [0x0302_0100_0000_0000, 0x0b0a_0908_0706_0504]);
        let (words, start) = end_aligned_words(&bytes[..8]);
        assert_eq!((words, start), (vec![0x0807_0605_0403_0201], 0));
    }

    #[test]
    fn zero_stream_and_limits() {
        // An all-zero stream is 16 zero blocks, one bit each.
        let out = decode(&[0; 2], &stage(&ACCURACY_CD, 1024)).unwrap();
        assert_eq!(out, vec![0u8; 1024]);
        let be = big_endian(&ACCURACY_CD);
        assert_eq!(decode(&[0; 2], &stage(&be, 1024)).unwrap(), vec![0u8; 1024]);
        // Integers and 4-D fields: 4 x 4 x 4 x 4 int64, one all-zero block.
        let cd = client_data(meta(2, &[4, 4, 4, 4]), REVERSIBLE);
        assert_eq!(decode(&[0], &stage(&cd, 2048)).unwrap(), vec![0u8; 2048]);
        // A field larger than the chunk allows.
        let e = decode(&[0; 4096], &stage(&ACCURACY_CD, 1000)).unwrap_err();
        assert!(e.contains("larger"), "{e}");
        let huge = client_data(meta(4, &[1 << 47]), REVERSIBLE);
        let e = decode(&[0; 8], &stage(&huge, 1 << 20)).unwrap_err();
        assert!(e.contains("larger"), "{e}");
        // Nonzero blocks need more bits than 8 bytes hold.
        let e = decode(&[0xff; 8], &stage(&ACCURACY_CD, 1024)).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        // Reading one bit past the chunk's last byte is truncation: 9 zero blocks of a
        // 36-element 1-D field need 9 bits.
        let cd = client_data(meta(3, &[36]), 2048 + 128 + 1 + 1067);
        assert_eq!(decode(&[0, 0], &stage(&cd, 144)).unwrap(), vec![0u8; 144]);
        let e = decode(&[0], &stage(&cd, 144)).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn big_endian_values_are_byte_swapped() {
        // Reversible fields of 4 numbers from arbitrary bytes: whatever they decode to, the
        // big-endian reading must give the same numbers with each one's bytes reversed.
        let input: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        for (ty, size) in [(1, 4), (2, 8), (3, 4), (4, 8)] {
            let cd = client_data(meta(ty, &[4]), REVERSIBLE);
            let le = decode(&input, &stage(&cd, 64)).unwrap();
            let be = decode(&input, &stage(&big_endian(&cd), 64)).unwrap();
            assert_eq!(le.len(), 4 * size);
            for (a, b) in le.chunks(size).zip(be.chunks(size)) {
                assert_eq!(a, b.iter().rev().copied().collect::<Vec<_>>());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any header words and stream bytes decode or fail, within the limit, without
        /// panicking.
        #[test]
        fn arbitrary_input_never_panics(
            cd in proptest::collection::vec(any::<u32>(), 0..7),
            meta in any::<u64>(),
            mode in any::<u64>(),
            data in proptest::collection::vec(any::<u8>(), 0..512),
            big in any::<bool>(),
        ) {
            // Half the cases get a valid magic, so the metadata and mode are exercised.
            let mut cd = cd;
            if cd.len() >= 4 && meta & 1 == 0 {
                cd[..4].copy_from_slice(&client_data(meta >> 1, mode));
            }
            let cd = if big && !cd.is_empty() { big_endian(&cd) } else { cd };
            if let Ok(out) = decode(&data, &stage(&cd, 4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }
    }
}
