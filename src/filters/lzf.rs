//! LZF filter (id 32000, h5py). The chunk is a bare LZF stream with no header; `cd[2]`
//! holds the uncompressed chunk size, but the stage limit already bounds the output.
//!
//! LZF (Marc Lehmann's liblzf) is a sequence of tokens, each starting with a control byte:
//! * `000lllll`: a literal run of `lllll + 1` bytes follows;
//! * `LLLooooo oooooooo` (L != 0): a back reference of length `L + 2` at distance
//!   `ooooo_oooooooo + 1`; when `L == 7` an extra byte follows the control byte and is
//!   added to the length (before the low offset byte).

//!
//! Decoded into a buffer of the chunk size, which the stream may not overrun. Short tokens
//! are copied as fixed 32-byte (literals) or 16-byte (matches) blocks when there is room
//! past them, so the copies are a few vector moves instead of `memcpy` calls; the bytes
//! written past a token are overwritten by the next ones. A match overlapping its own output
//! (a run with a short period) is copied in 16-byte blocks once a period-aligned 16 bytes
//! are written.

use super::Stage;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; stage.limit.min(input.len().saturating_mul(64))];
    let n = decode_into(input, &mut out)?;
    out.truncate(n);
    Ok(out)
}

fn truncated(at: usize) -> String {
    format!("stream truncated at input byte {at}")
}

fn expands(limit: usize) -> String {
    format!("expands past the chunk size {limit}")
}

/// Decode `input` into `out`; the number of bytes written.
pub(crate) fn decode_into(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    let cap = out.len();
    let mut ip = 0usize;
    let mut op = 0usize;
    while let Some(&c) = input.get(ip) {
        let ctrl = c as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if ip + 32 <= input.len() && op + 32 <= cap {
                out[op..op + 32].copy_from_slice(&input[ip..ip + 32]);
            } else {
                let lit = input.get(ip..ip + run).ok_or_else(|| truncated(ip))?;
                out.get_mut(op..op + run)
                    .ok_or_else(|| expands(cap))?
                    .copy_from_slice(lit);
            }
            ip += run;
            op += run;
            if op > cap {
                return Err(expands(cap));
            }
            continue;
        }
        let mut len = ctrl >> 5;
        if len == 7 {
            len += *input.get(ip).ok_or_else(|| truncated(ip))? as usize;
            ip += 1;
        }
        len += 2;
        let low = *input.get(ip).ok_or_else(|| truncated(ip))? as usize;
        ip += 1;
        let dist = ((ctrl & 0x1f) << 8) + low + 1;
        let start = op
            .checked_sub(dist)
            .ok_or_else(|| format!("back reference before the start at input byte {ip}"))?;
        if op + len > cap {
            return Err(expands(cap));
        }
        if dist >= 16 && op + len + 16 <= cap {
            // Each 16-byte block reads bytes written before it (dist >= 16).
            let mut k = 0;
            while k < len {
                out.copy_within(start + k..start + k + 16, op + k);
                k += 16;
            }
        } else if dist >= len {
            out.copy_within(start..start + len, op);
        } else if op + len + 16 <= cap {
            // Overlapping copy with room past it: the run repeats the last `dist` bytes.
            // Byte by byte up to `step`, the first multiple of the period of at least 16
            // bytes, then 16-byte blocks from `step` back, which are already written.
            let step = dist * 16usize.div_ceil(dist);
            let head = len.min(step);
            for k in 0..head {
                out[op + k] = out[start + k];
            }
            let mut k = head;
            while k < len {
                out.copy_within(op + k - step..op + k - step + 16, op + k);
                k += 16;
            }
        } else {
            // The same at the end of the buffer. Everything from `start` to the write
            // position has the period, so each step copies all of it, doubling the span.
            let mut done = 0;
            while done < len {
                let n = (op + done - start).min(len - done);
                out.copy_within(start..start + n, op + done);
                done += n;
            }
        }
        op += len;
    }
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal run, a long match, an overlapping run, a short far match.
    #[test]
    fn tokens_decode_and_bounds_hold() {
        let mut s = vec![31u8];
        s.extend(0..32u8);
        // len 7+10+2 = 19 at distance 32.
        s.extend([0xe0, 10, 31]);
        // len 5 at distance 1 (overlapping).
        s.extend([0x60, 0]);
        // len 7+200+2 = 209 at distance 3 (overlapping, period 3).
        s.extend([0xe0, 200, 2]);
        // len 3 at distance 40.
        s.extend([0x20, 39]);
        let mut want: Vec<u8> = (0..32).collect();
        want.extend(0..19u8);
        want.extend([18; 5]);
        for _ in 0..209 {
            want.push(want[want.len() - 3]);
        }
        let at = want.len() - 40;
        want.extend_from_slice(&want.clone()[at..at + 3]);
        for slack in [0, 1, 64] {
            let mut out = vec![0u8; want.len() + slack];
            let n = decode_into(&s, &mut out).unwrap();
            assert_eq!(&out[..n], &want[..], "slack {slack}");
        }
        let mut small = vec![0u8; want.len() - 1];
        assert!(decode_into(&s, &mut small).is_err());
        assert!(decode_into(&[0x20, 200], &mut [0u8; 8]).is_err());
        assert!(decode_into(&[5, 1, 2], &mut [0u8; 8]).is_err());
    }
}
