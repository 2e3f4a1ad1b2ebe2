//! LZO filter (id 305, PyTables): an LZO1X stream (as `lzo1x_1_compress` writes it),
//! followed by the Adler-32 of the decoded bytes and their length (two u32, little-endian),
//! except for PyTables tables older than format 2.0 (`cd = [level, version, type]`, type 0 =
//! Table with version < 20), which have no trailer.
//!
//! LZO1X is a byte-oriented LZ77 code driven by a small state, the number of literals the
//! previous instruction copied (0, 1-3, or 4 for "4 or more"):
//! * first byte above 17: `byte - 17` literals (the state becomes that count, capped at 4);
//! * `0000LLLL`: with state 0, a literal run of `L + 3` bytes (`L = 0`: 18 plus 255 per
//!   zero byte plus the next non-zero byte) and state 4; with state 1-3, a 2-byte match at
//!   distance `(H << 2) + D + 1` (`D` = bits 2-3, `H` the next byte); with state 4, a
//!   3-byte match at distance `(H << 2) + D + 2049`;
//! * `0001HLLL`: length `L + 2` (`L = 0`: extended from 9), then a LE16 `v`; distance
//!   `16384 + (H << 14) + (v >> 2)`, and distance 16384 ends the stream;
//! * `001LLLLL`: length `L + 2` (`L = 0`: extended from 33), then a LE16 `v`; distance
//!   `(v >> 2) + 1`;
//! * `01LDDDSS` and `1LLDDDSS`: length `L + 3` or `L + 5`, distance `(H << 3) + D + 1`
//!   with `H` the next byte.
//!
//! Every match sets the state to its low two bits `S` (of the opcode, or of `v`) and is
//! followed by `S` literals.

use super::Stage;

/// PyTables' `TablesType` value for tables.
const PYTABLES_TABLE: u32 = 0;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let old_table = stage.cd.len() >= 3 && stage.cd[2] == PYTABLES_TABLE && stage.cd[1] < 20;
    if old_table {
        return lzo1x(input, stage.limit);
    }
    let n = input.len();
    let body = n
        .checked_sub(8)
        .ok_or("LZO chunk shorter than its trailer")?;
    let word =
        |at: usize| u32::from_le_bytes([input[at], input[at + 1], input[at + 2], input[at + 3]]);
    let (checksum, len) = (word(body), word(body + 4) as usize);
    if len > stage.limit {
        return Err(format!(
            "LZO trailer declares {len} bytes, past the chunk size"
        ));
    }
    let out = lzo1x(&input[..body], len)?;
    if out.len() != len {
        return Err(format!(
            "LZO stream gave {} bytes, trailer says {len}",
            out.len()
        ));
    }
    let sum = adler32(&out);
    if sum != checksum {
        return Err(format!("LZO Adler-32 {sum:#010x}, stored {checksum:#010x}"));
    }
    Ok(out)
}

fn adler32(data: &[u8]) -> u32 {
    // 5552 bytes keep both sums below 2^32 before reduction (zlib's NMAX).
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

struct Input<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<usize, String> {
        let b = *self.buf.get(self.pos).ok_or("LZO stream truncated")?;
        self.pos += 1;
        Ok(usize::from(b))
    }

    fn le16(&mut self) -> Result<usize, String> {
        Ok(self.byte()? | (self.byte()? << 8))
    }

    /// A length `base + L`, or when `L == 0`, `base + extra + 255 * zero bytes + the
    /// next non-zero byte`.
    fn length(&mut self, l: usize, base: usize, extra: usize) -> Result<usize, String> {
        if l != 0 {
            return Ok(base + l);
        }
        let mut n = base + extra;
        loop {
            let b = self.byte()?;
            if b != 0 {
                return Ok(n + b);
            }
            // Bounded by the input: one byte per 255.
            n += 255;
        }
    }
}

/// Decode an LZO1X stream of at most `limit` bytes.
pub(crate) fn lzo1x(src: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut ip = Input { buf: src, pos: 0 };
    let mut out: Vec<u8> = Vec::with_capacity(limit.min(src.len().saturating_mul(4)));
    let literals = |ip: &mut Input, out: &mut Vec<u8>, n: usize| -> Result<(), String> {
        let s = ip
            .buf
            .get(ip.pos..ip.pos.saturating_add(n))
            .ok_or("LZO literal run truncated")?;
        if out.len() + n > limit {
            return Err("LZO output past the chunk size".to_string());
        }
        out.extend_from_slice(s);
        ip.pos += n;
        Ok(())
    };
    let copy = |out: &mut Vec<u8>, dist: usize, len: usize| -> Result<(), String> {
        let from = out
            .len()
            .checked_sub(dist)
            .ok_or("LZO match reaches before the output start")?;
        if out.len() + len > limit {
            return Err("LZO output past the chunk size".to_string());
        }
        for k in 0..len {
            let b = out[from + k];
            out.push(b);
        }
        Ok(())
    };
    let mut state = 0usize;
    if let Some(&first) = src.first() {
        if first > 17 {
            ip.pos = 1;
            let n = usize::from(first) - 17;
            literals(&mut ip, &mut out, n)?;
            state = n.min(4);
        }
    }
    loop {
        let op = ip.byte()?;
        let (len, dist, s) = match op {
            0..=15 => match state {
                0 => {
                    let n = ip.length(op, 3, 15)?;
                    literals(&mut ip, &mut out, n)?;
                    state = 4;
                    continue;
                }
                1..=3 => (2, (ip.byte()? << 2) + (op >> 2) + 1, op & 3),
                _ => (3, (ip.byte()? << 2) + (op >> 2) + 2049, op & 3),
            },
            16..=31 => {
                let len = ip.length(op & 7, 2, 7)?;
                let v = ip.le16()?;
                let dist = 16384 + ((op & 8) << 11) + (v >> 2);
                if dist == 16384 {
                    return if ip.pos == src.len() {
                        Ok(out)
                    } else {
                        Err("bytes after the LZO end marker".into())
                    };
                }
                (len, dist, v & 3)
            }
            32..=63 => {
                let len = ip.length(op & 31, 2, 31)?;
                let v = ip.le16()?;
                (len, (v >> 2) + 1, v & 3)
            }
            64..=127 => (
                3 + ((op >> 5) & 1),
                (ip.byte()? << 3) + ((op >> 2) & 7) + 1,
                op & 3,
            ),
            _ => (
                5 + ((op >> 5) & 3),
                (ip.byte()? << 3) + ((op >> 2) & 7) + 1,
                op & 3,
            ),
        };
        copy(&mut out, dist, len)?;
        literals(&mut ip, &mut out, s)?;
        state = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(b""), 1);
    }

    #[test]
    fn hand_made_streams() {
        // 3 literals "abc" (first byte 17 + 3), then 0x40-class match: length 3, distance
        // 3, no literals (`01 0 010 00` = 0x48, H = 0), then the end marker.
        let s = [20, b'a', b'b', b'c', 0x48, 0, 0x11, 0, 0];
        assert_eq!(lzo1x(&s, 16).unwrap(), b"abcabc");
        // Output cap, bytes after the end marker, and a match before the output start.
        assert!(lzo1x(&s, 5).is_err());
        let mut extra = s.to_vec();
        extra.push(0);
        assert!(lzo1x(&extra, 16).is_err());
        assert!(lzo1x(&[20, b'a', b'b', b'c', 0x4c, 0, 0x11, 0, 0], 16).is_err());
        // Truncated everywhere.
        for cut in 0..s.len() {
            assert!(lzo1x(&s[..cut], 16).is_err(), "{cut}");
        }
    }

    #[test]
    fn trailer_is_checked() {
        let mut c = vec![20, b'a', b'b', b'c', 0x48, 0, 0x11, 0, 0];
        c.extend_from_slice(&adler32(b"abcabc").to_le_bytes());
        c.extend_from_slice(&6u32.to_le_bytes());
        let stage = Stage {
            cd: &[1, 20, 2],
            limit: 100,
        };
        assert_eq!(decode(&c, &stage).unwrap(), b"abcabc");
        let mut bad = c.clone();
        bad[9] ^= 1;
        assert!(decode(&bad, &stage).is_err());
        let small = Stage {
            cd: &[1, 20, 2],
            limit: 5,
        };
        assert!(decode(&c, &small).is_err());
        // An old PyTables table has no trailer.
        let old = Stage {
            cd: &[1, 10, 0],
            limit: 100,
        };
        assert_eq!(decode(&c[..9], &old).unwrap(), b"abcabc");
    }
}
