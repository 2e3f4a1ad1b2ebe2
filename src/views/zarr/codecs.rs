//! The codec mapping: which HDF5 filter pipelines a Zarr codec chain decodes byte for byte,
//! so that chunk keys can hold the stored chunks as they are (pass-through).
//!
//! HDF5 lists filters in the order the writer applied them; a Zarr v3 `codecs` list is in
//! encoding order too, after the array→bytes codec, so filter `i` becomes codec `i + 1`. A
//! Zarr v2 array decodes its `compressor` first, then its `filters` last to first: the last
//! HDF5 filter becomes the compressor and the others the filters, in order (deflate alone is
//! `compressor: zlib`; shuffle+deflate is `filters: [shuffle]`, `compressor: zlib`; with
//! fletcher32 last, the checksum is the compressor, checked first as HDF5 checks it).
//!
//! | HDF5 filter (id)   | v3 codec                                  | v2 codec            |
//! |--------------------|-------------------------------------------|---------------------|
//! | deflate (1)        | `numcodecs.zlib` (a zlib stream, RFC 1950: the core `gzip` codec is RFC 1952 and does not read it) | `zlib` |
//! | shuffle (2)        | `numcodecs.shuffle` (element size `cd[0]`) | `shuffle`           |
//! | fletcher32 (3)     | `numcodecs.fletcher32` (same sum, same 4 little-endian bytes at the end) | `fletcher32` |
//! | bzip2 (307)        | `numcodecs.bz2`                           | `bz2`               |
//! | blosc (32001)      | `blosc` (one Blosc 1 frame, self-describing) | `blosc`          |
//! | zstd (32015)       | `zstd` (one zstd frame)                   | `zstd`              |
//!
//! numcodecs' shuffle refuses a buffer that is not a whole number of elements, where HDF5
//! leaves the trailing bytes in place: a shuffle is mapped only where its input size is
//! known (only shuffles and checksums before it) and a multiple of its element size. Blosc
//! frames compressed with Snappy are not mapped (numcodecs' Blosc is built without it). No
//! other filter has a Zarr codec that reads its stream (szip, nbit, scaleoffset, LZF, LZ4 in
//! HDF5's block framing, bitshuffle's framing, ZFP's plugin header, Blosc 2's plugin frames,
//! LZO, and any unknown id): such arrays are served decoded, with the reason.
//!
//! A chunk whose stored form differs from the pipeline's (its filter mask skips a filter, or
//! a partial edge chunk is stored unfiltered) is encoded again with the chain from its
//! decoded bytes ([`encode`], with [`crate::filters::encode`]); so is a Fletcher-32 sum in
//! the byte-swapped form of libraries before 1.6.3, which numcodecs rejects.

use serde_json::{json, Value};

use crate::filters::{encode as enc, filter_name, ids};
use crate::format::messages::filter_pipeline::FilterSpec;

/// One Zarr codec standing for one HDF5 filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Codec {
    Zlib {
        level: u32,
    },
    Shuffle {
        elementsize: u32,
    },
    Fletcher32,
    Bz2 {
        level: u32,
    },
    Zstd {
        level: i32,
    },
    Blosc {
        cname: &'static str,
        clevel: u32,
        /// 0 none, 1 byte shuffle, 2 bit shuffle.
        shuffle: u32,
        typesize: u32,
    },
}

/// Blosc 1 compressor codes (the HDF5 filter's `cd[6]`) and numcodecs' names for them;
/// Snappy (3) is left out, as numcodecs' Blosc is built without it.
fn blosc_cname(code: u32) -> Option<&'static str> {
    match code {
        0 => Some("blosclz"),
        1 => Some("lz4"),
        2 => Some("lz4hc"),
        4 => Some("zlib"),
        5 => Some("zstd"),
        _ => None,
    }
}

/// The v3 blosc codec's names of Blosc's shuffle modes 0, 1 and 2.
const SHUFFLE_NAMES: [&str; 3] = ["noshuffle", "shuffle", "bitshuffle"];

impl Codec {
    /// Its name in a v3 `codecs` list.
    pub fn v3_name(&self) -> &'static str {
        match self {
            Codec::Zlib { .. } => "numcodecs.zlib",
            Codec::Shuffle { .. } => "numcodecs.shuffle",
            Codec::Fletcher32 => "numcodecs.fletcher32",
            Codec::Bz2 { .. } => "numcodecs.bz2",
            Codec::Zstd { .. } => "zstd",
            Codec::Blosc { .. } => "blosc",
        }
    }

    /// Its v3 codec object.
    pub fn v3(&self) -> Value {
        let conf = match *self {
            Codec::Zlib { level } | Codec::Bz2 { level } => json!({ "level": level }),
            Codec::Shuffle { elementsize } => json!({ "elementsize": elementsize }),
            Codec::Fletcher32 => json!({}),
            Codec::Zstd { level } => json!({ "level": level, "checksum": false }),
            Codec::Blosc {
                cname,
                clevel,
                shuffle,
                typesize,
            } => json!({
                "cname": cname,
                "clevel": clevel,
                "shuffle": SHUFFLE_NAMES[shuffle.min(2) as usize],
                "typesize": typesize,
                "blocksize": 0,
            }),
        };
        json!({ "name": self.v3_name(), "configuration": conf })
    }

    /// Its v2 (numcodecs) codec object.
    pub fn v2(&self) -> Value {
        match *self {
            Codec::Zlib { level } => json!({ "id": "zlib", "level": level }),
            Codec::Shuffle { elementsize } => {
                json!({ "id": "shuffle", "elementsize": elementsize })
            }
            Codec::Fletcher32 => json!({ "id": "fletcher32" }),
            Codec::Bz2 { level } => json!({ "id": "bz2", "level": level }),
            Codec::Zstd { level } => json!({ "id": "zstd", "level": level }),
            Codec::Blosc {
                cname,
                clevel,
                shuffle,
                ..
            } => json!({
                "id": "blosc", "cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": 0,
            }),
        }
    }

    /// Encode `data` as this codec would (see [`crate::filters::encode`]).
    fn encode(&self, data: Vec<u8>) -> Result<Vec<u8>, String> {
        match *self {
            Codec::Zlib { .. } => enc::zlib(&data),
            Codec::Shuffle { elementsize } => Ok(enc::shuffle(&data, elementsize as usize)),
            Codec::Fletcher32 => Ok(enc::fletcher32(&data)),
            Codec::Bz2 { .. } => enc::bzip2(&data),
            Codec::Zstd { .. } => enc::zstd(&data),
            Codec::Blosc { typesize, .. } => {
                enc::blosc_memcpy(&data, u8::try_from(typesize).unwrap_or(1))
            }
        }
    }
}

/// The codec chain that decodes chunks stored through `filters` (in pipeline order) byte
/// for byte, for chunks of `chunk_bytes` decoded bytes; or why there is none.
pub fn chain(filters: &[FilterSpec], chunk_bytes: u64) -> Result<Vec<Codec>, String> {
    // Bytes entering the next filter, while every filter so far keeps it known.
    let mut size = Some(chunk_bytes);
    let mut out = Vec::with_capacity(filters.len());
    for f in filters {
        let cd = |i: usize| f.client_data.get(i).copied();
        let name = filter_name(f.id);
        let codec = match f.id {
            ids::DEFLATE => Codec::Zlib {
                level: cd(0).unwrap_or(6).min(9),
            },
            ids::SHUFFLE => {
                let es = cd(0).ok_or("shuffle without an element size (cd[0])")?;
                match size {
                    _ if es == 0 => return Err("shuffle over elements of 0 bytes".into()),
                    Some(n) if n % u64::from(es) == 0 => Codec::Shuffle { elementsize: es },
                    Some(n) => {
                        return Err(format!(
                            "shuffle over {es}-byte elements of a {n}-byte input, which \
                             numcodecs' shuffle refuses"
                        ))
                    }
                    None => {
                        return Err(
                            "shuffle after a compressor: its input size varies by chunk, \
                             and numcodecs' shuffle takes whole elements only"
                                .into(),
                        )
                    }
                }
            }
            ids::FLETCHER32 => Codec::Fletcher32,
            ids::BZIP2 => Codec::Bz2 {
                level: cd(0).unwrap_or(9).clamp(1, 9),
            },
            ids::ZSTD => Codec::Zstd {
                // The plugin stores the (possibly negative) level as a C int.
                level: cd(0).map_or(3, |l| l as i32),
            },
            ids::BLOSC => {
                let code = cd(6).unwrap_or(0);
                let cname = blosc_cname(code).ok_or_else(|| {
                    format!("blosc with compressor code {code}, which numcodecs' Blosc lacks")
                })?;
                let shuffle = cd(5).unwrap_or(1);
                if shuffle > 2 {
                    return Err(format!("blosc with shuffle mode {shuffle}"));
                }
                Codec::Blosc {
                    cname,
                    clevel: cd(4).unwrap_or(5).min(9),
                    shuffle,
                    typesize: cd(2).unwrap_or(1).clamp(1, 255),
                }
            }
            ids::SZIP => return Err("szip: no Zarr codec reads HDF5's szip stream".into()),
            ids::NBIT | ids::SCALEOFFSET => {
                return Err(format!("{name}: HDF5's own packing, with no Zarr codec"))
            }
            ids::LZ4 => {
                return Err("lz4: HDF5's LZ4 block framing is not numcodecs' LZ4 stream".into())
            }
            ids::BITSHUFFLE => {
                return Err("bitshuffle: the HDF5 plugin's framing has no Zarr codec".into())
            }
            ids::ZFP => return Err("zfp: the HDF5 plugin's stream header has no Zarr codec".into()),
            ids::BLOSC2 => {
                return Err("blosc2: the HDF5 plugin's frames are not the blosc codec's".into())
            }
            id => return Err(format!("{name} (filter {id}): no Zarr codec")),
        };
        size = match codec {
            Codec::Shuffle { .. } => size,
            Codec::Fletcher32 => size.and_then(|n| n.checked_add(4)),
            _ => None,
        };
        out.push(codec);
    }
    Ok(out)
}

/// `decoded` (a whole decoded chunk) encoded with `chain`, in order.
pub fn encode(chain: &[Codec], decoded: Vec<u8>) -> Result<Vec<u8>, String> {
    chain.iter().try_fold(decoded, |data, c| c.encode(data))
}

/// A stored chunk under a chain ending in Fletcher-32, fixed where libraries before 1.6.3
/// wrote the sum with the bytes of each 16-bit half swapped (numcodecs accepts only the
/// modern form; the sum covers the same bytes, so the chunk keeps its size). `Err` when the
/// sum matches neither form: the chunk is damaged.
pub fn fix_fletcher32(mut stored: Vec<u8>) -> Result<Vec<u8>, String> {
    let body = stored
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes cannot hold a checksum", stored.len()))?;
    let sum = crate::io::checksum::fletcher32(&stored[..body]);
    let swapped = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
    let have = u32::from_le_bytes([
        stored[body],
        stored[body + 1],
        stored[body + 2],
        stored[body + 3],
    ]);
    if have == sum {
        return Ok(stored);
    }
    if have != swapped {
        return Err(format!(
            "fletcher32 mismatch: stored {have:#010x}, computed {sum:#010x}"
        ));
    }
    stored[body..].copy_from_slice(&sum.to_le_bytes());
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: u16, cd: &[u32]) -> FilterSpec {
        FilterSpec {
            id,
            flags: 0,
            name: None,
            client_data: cd.to_vec(),
        }
    }

    #[test]
    fn chains_follow_the_pipeline_order() {
        let c = chain(&[f(2, &[4]), f(1, &[4]), f(3, &[])], 1024).unwrap();
        assert_eq!(
            c,
            vec![
                Codec::Shuffle { elementsize: 4 },
                Codec::Zlib { level: 4 },
                Codec::Fletcher32
            ]
        );
        assert_eq!(
            c[1].v3(),
            json!({"name": "numcodecs.zlib", "configuration": {"level": 4}})
        );
        assert_eq!(c[0].v2(), json!({"id": "shuffle", "elementsize": 4}));
        let b = chain(&[f(32001, &[2, 2, 4, 1024, 5, 2, 5])], 1024).unwrap();
        assert_eq!(
            b[0].v3(),
            json!({"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5,
                "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}})
        );
        assert_eq!(
            b[0].v2(),
            json!({"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 2, "blocksize": 0})
        );
        let z = chain(&[f(32015, &[(-5i32) as u32])], 8).unwrap();
        assert_eq!(z[0].v2(), json!({"id": "zstd", "level": -5}));
        assert_eq!(
            chain(&[f(307, &[9])], 8).unwrap()[0].v2(),
            json!({"id": "bz2", "level": 9})
        );
        // A shuffle after a checksum still knows its input size.
        assert!(chain(&[f(3, &[]), f(2, &[4])], 1020).is_ok());
    }

    #[test]
    fn unmappable_pipelines_say_why() {
        let why = |fs: &[FilterSpec], n| chain(fs, n).unwrap_err();
        assert!(why(&[f(1, &[4]), f(2, &[4])], 1024).contains("shuffle after a compressor"));
        assert!(why(&[f(2, &[4])], 1022).contains("1022-byte input"));
        assert!(why(&[f(2, &[])], 1024).contains("element size"));
        assert!(why(&[f(32001, &[2, 2, 4, 1024, 5, 1, 3])], 8).contains("compressor code 3"));
        assert!(why(&[f(4, &[])], 8).starts_with("szip"));
        assert!(why(&[f(5, &[])], 8).starts_with("nbit"));
        assert!(why(&[f(32004, &[])], 8).starts_with("lz4"));
        assert!(why(&[f(32008, &[])], 8).starts_with("bitshuffle"));
        assert!(why(&[f(32000, &[])], 8).contains("no Zarr codec"));
        assert!(why(&[f(40000, &[])], 8).contains("filter 40000"));
    }

    #[test]
    fn swapped_fletcher_sums_are_fixed_and_bad_ones_refused() {
        let data = b"some chunk bytes!".to_vec();
        let good = enc::fletcher32(&data);
        assert_eq!(fix_fletcher32(good.clone()).unwrap(), good);
        let mut old = good.clone();
        let n = old.len();
        let sum = crate::io::checksum::fletcher32(&data);
        let swapped = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
        old[n - 4..].copy_from_slice(&swapped.to_le_bytes());
        assert_eq!(fix_fletcher32(old).unwrap(), good);
        let mut bad = good;
        bad[0] ^= 1;
        assert!(fix_fletcher32(bad).unwrap_err().contains("mismatch"));
    }
}
