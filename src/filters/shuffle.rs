//! Shuffle filter (id 2): the writer stores byte 0 of every element, then byte 1 of every
//! element, and so on (`cd[0]` = element size). Bytes after the last whole element are stored
//! as they are. Unshuffling is on the hot path of every shuffled dataset, so the common
//! element sizes get a monomorphised loop the compiler can vectorise: for 2- and 4-byte
//! elements each element is assembled as one integer from its plane bytes (shifts and ors
//! that vectorise well: faster than the byte transpose for 4-byte elements, while the
//! transpose remains faster for 8 and 16 bytes; figures in `docs/performance.md`).

use super::Stage;

pub(crate) fn decode(data: Vec<u8>, stage: &Stage) -> Result<Vec<u8>, String> {
    let elem = *stage.cd.first().ok_or("missing element size (cd[0])")? as usize;
    if elem <= 1 || data.len() < elem {
        return Ok(data);
    }
    let mut out = vec![0u8; data.len()];
    unshuffle(&data, &mut out, elem);
    Ok(out)
}

/// Undo the byte shuffle of `src` into `dst` (same length) for elements of `elem` bytes.
pub fn unshuffle(src: &[u8], dst: &mut [u8], elem: usize) {
    assert_eq!(src.len(), dst.len(), "unshuffle buffers differ in length");
    if elem <= 1 {
        dst.copy_from_slice(src);
        return;
    }
    let n = src.len() / elem;
    let body = n * elem;
    match elem {
        2 => unshuffle_word::<2>(&src[..body], &mut dst[..body]),
        4 => unshuffle_word::<4>(&src[..body], &mut dst[..body]),
        8 => unshuffle_n::<8>(&src[..body], &mut dst[..body]),
        16 => unshuffle_n::<16>(&src[..body], &mut dst[..body]),
        _ => {
            for (b, plane) in src[..body].chunks_exact(n.max(1)).enumerate() {
                for (j, &x) in plane.iter().enumerate() {
                    dst[j * elem + b] = x;
                }
            }
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// `rounds` byte unshuffles of `src` into `dst` (Blosc2's shuffle filter with a meta byte
/// repeats it up to 256 times per filter slot) in one pass, whatever `rounds` is: a hostile
/// chunk cannot make the work grow with it.
///
/// One unshuffle sends the byte at `s = b·n + j` of the body (`n` elements of `elem` bytes,
/// plane `b`, element `j`) to `j·elem + b`, which is `s·elem` modulo `body − 1` (the last
/// byte stays). So `rounds` of them send it to `s·elemʳ` modulo `body − 1`: one multiplier,
/// stepped by addition along `s`. The tail past the last whole element is left in place.
pub fn unshuffle_rounds(src: &[u8], dst: &mut [u8], elem: usize, rounds: u32) {
    assert_eq!(src.len(), dst.len(), "unshuffle buffers differ in length");
    if rounds <= 1 || elem <= 1 {
        return if rounds == 0 {
            dst.copy_from_slice(src)
        } else {
            unshuffle(src, dst, elem)
        };
    }
    let body = src.len() / elem * elem;
    dst[body..].copy_from_slice(&src[body..]);
    if body < 2 {
        dst[..body].copy_from_slice(&src[..body]);
        return;
    }
    let m = (body - 1) as u128;
    let mut mult: u128 = 1;
    let (mut base, mut e) = (elem as u128 % m, rounds);
    while e > 0 {
        if e & 1 == 1 {
            mult = mult * base % m;
        }
        base = base * base % m;
        e >>= 1;
    }
    // Both below body - 1 < 2^63, so their sum does not overflow.
    let (m, step) = (body - 1, mult as usize);
    let mut d = 0usize;
    for &x in &src[..m] {
        dst[d] = x;
        d += step;
        if d >= m {
            d -= m;
        }
    }
    dst[m] = src[m];
}

/// Elements of `N` <= 8 bytes, each built as a little-endian word from its plane bytes.
fn unshuffle_word<const N: usize>(src: &[u8], dst: &mut [u8]) {
    let n = src.len() / N;
    let planes: [&[u8]; N] = std::array::from_fn(|b| &src[b * n..(b + 1) * n]);
    for (j, out) in dst[..n * N].chunks_exact_mut(N).enumerate() {
        let mut v = 0u64;
        for (b, plane) in planes.iter().enumerate() {
            v |= u64::from(plane[j]) << (8 * b);
        }
        out.copy_from_slice(&v.to_le_bytes()[..N]);
    }
}

fn unshuffle_n<const N: usize>(src: &[u8], dst: &mut [u8]) {
    let n = src.len() / N;
    if n == 0 {
        return;
    }
    let planes: [&[u8]; N] = std::array::from_fn(|b| &src[b * n..(b + 1) * n]);
    // Eight elements at a time: one 8-byte load per plane, then a fixed-size transpose the
    // compiler keeps in registers (faster than element by element).
    let groups = n / 8;
    for (g, out) in dst[..groups * 8 * N].chunks_exact_mut(8 * N).enumerate() {
        let rows: [[u8; 8]; N] = std::array::from_fn(|b| {
            let mut row = [0u8; 8];
            row.copy_from_slice(&planes[b][g * 8..g * 8 + 8]);
            row
        });
        for i in 0..8 {
            for b in 0..N {
                out[i * N + b] = rows[b][i];
            }
        }
    }
    for j in groups * 8..n {
        for b in 0..N {
            dst[j * N + b] = planes[b][j];
        }
    }
}

/// The writer's side, for tests and tools: byte-shuffle `src` into `dst`.
pub fn shuffle(src: &[u8], dst: &mut [u8], elem: usize) {
    assert_eq!(src.len(), dst.len(), "shuffle buffers differ in length");
    if elem <= 1 {
        dst.copy_from_slice(src);
        return;
    }
    let n = src.len() / elem;
    let body = n * elem;
    for j in 0..n {
        for b in 0..elem {
            dst[b * n + j] = src[j * elem + b];
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_rounds_in_one_pass_equal_repeated_unshuffles() {
        for elem in [2usize, 3, 4, 5, 8, 16, 17] {
            for len in [
                0usize,
                1,
                2,
                elem,
                elem + 1,
                7 * elem,
                7 * elem + 3,
                1000,
                4096,
            ] {
                let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
                let mut want = src.clone();
                for rounds in 0u32..=12 {
                    let mut got = vec![0; len];
                    unshuffle_rounds(&src, &mut got, elem, rounds);
                    assert_eq!(got, want, "elem {elem} len {len} rounds {rounds}");
                    let mut next = vec![0; len];
                    unshuffle(&want, &mut next, elem);
                    want = next;
                }
            }
        }
        // 256 rounds of a 1 MiB block take one pass.
        let src: Vec<u8> = (0..1 << 20).map(|i| i as u8).collect();
        let mut once = vec![0; src.len()];
        unshuffle_rounds(&src, &mut once, 4, 256);
        let mut slow = src.clone();
        let mut tmp = vec![0; src.len()];
        for _ in 0..256 {
            unshuffle(&slow, &mut tmp, 4);
            std::mem::swap(&mut slow, &mut tmp);
        }
        assert_eq!(once, slow);
    }

    #[test]
    fn round_trip_all_sizes_and_odd_lengths() {
        for elem in 1..=16usize {
            for len in [0usize, 1, 7, 15, 16, 17, 63, 64, 255, 1000, 1021] {
                let src: Vec<u8> = (0..len).map(|i| (i * 7 + elem * 13) as u8).collect();
                let mut sh = vec![0; len];
                shuffle(&src, &mut sh, elem);
                let mut back = vec![0; len];
                unshuffle(&sh, &mut back, elem);
                assert_eq!(back, src, "elem {elem} len {len}");
            }
        }
    }

    #[test]
    fn known_layout() {
        let mut out = [0u8; 7];
        unshuffle(&[1, 3, 5, 2, 4, 6, 9], &mut out, 2);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 9]);
    }
}
