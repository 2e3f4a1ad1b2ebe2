//! The two checksums of the HDF5 format.
//!
//! * Jenkins' lookup3 `hashlittle` (public domain, 2006) protects every version-2 structure
//!   (superblock v2/v3, object header v2, B-tree v2, fractal heap, fixed and extensible arrays)
//!   and hashes link and attribute names in v2 B-tree records 5 and 8.
//! * Fletcher-32 over big-endian 16-bit words, as the fletcher32 filter (id 3) appends to chunks.

#[inline]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline]
fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

fn word(k: &[u8]) -> u32 {
    // Little-endian assembly of up to four bytes; missing bytes count as zero.
    k.iter()
        .enumerate()
        .fold(0u32, |acc, (i, &x)| acc.wrapping_add((x as u32) << (8 * i)))
}

/// Jenkins lookup3 `hashlittle` of `data` with initial value `init` (HDF5 uses 0).
pub fn lookup3(data: &[u8], init: u32) -> u32 {
    let mut a = 0xdead_beefu32
        .wrapping_add(data.len() as u32)
        .wrapping_add(init);
    let mut b = a;
    let mut c = a;
    let mut k = data;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    finish(&mut a, &mut b, &mut c);
    c
}

/// Verify that the last four bytes of `block` are the lookup3 checksum of the rest.
pub fn verify_lookup3(block: &[u8]) -> bool {
    if block.len() < 4 {
        return false;
    }
    let (body, sum) = block.split_at(block.len() - 4);
    lookup3(body, 0) == u32::from_le_bytes(sum.try_into().unwrap())
}

/// Fletcher-32 as HDF5 computes it: 16-bit words taken big-endian, an odd last byte as the
/// high half of a word, sums folded modulo 65535 every 360 words (before they can overflow).
pub fn fletcher32(data: &[u8]) -> u32 {
    let mut sum1: u32 = 0;
    let mut sum2: u32 = 0;
    let mut words = data.chunks_exact(2);
    loop {
        let mut n = 0;
        for w in words.by_ref().take(360) {
            sum1 += ((w[0] as u32) << 8) | w[1] as u32;
            sum2 += sum1;
            n += 1;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
        if n < 360 {
            break;
        }
    }
    if let [last] = words.remainder() {
        sum1 += (*last as u32) << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup3_reference_values() {
        // Values from the test driver published with lookup3.c.
        assert_eq!(lookup3(b"", 0), 0xdeadbeef);
        assert_eq!(lookup3(b"", 0xdeadbeef), 0xbd5b7dde);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x17770551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd628161);
    }

    #[test]
    fn fletcher32_small() {
        // "abcde": words 0x6162, 0x6364, odd byte 0x65 -> high half.
        let s1 = 0x6162u32 + 0x6364 + 0x6500;
        let s2 = 0x6162u32 + (0x6162 + 0x6364) + s1;
        let fold = |x: u32| (x & 0xffff) + (x >> 16);
        assert_eq!(
            fletcher32(b"abcde"),
            (fold(fold(s2)) << 16) | fold(fold(s1))
        );
    }
}
