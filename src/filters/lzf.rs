//! LZF filter (id 32000, h5py). The chunk is a bare LZF stream with no header; `cd[2]`
//! holds the uncompressed chunk size, but the stage limit already bounds the output.
//!
//! LZF (Marc Lehmann's liblzf) is a sequence of tokens, each starting with a control byte:
//! * `000lllll`: a literal run of `lllll + 1` bytes follows;
//! * `LLLooooo oooooooo` (L != 0): a back reference of length `L + 2` at distance
//!   `ooooo_oooooooo + 1`; when `L == 7` an extra byte follows the control byte and is
//!   added to the length (before the low offset byte).

use super::Stage;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(stage.limit.min(input.len().saturating_mul(64)));
    let mut ip = 0usize;
    let trunc = |at: usize| format!("stream truncated at input byte {at}");
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input.get(ip..ip + run).ok_or_else(|| trunc(ip))?;
            if out.len() + run > stage.limit {
                return Err(format!("expands past the chunk size {}", stage.limit));
            }
            out.extend_from_slice(lit);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or_else(|| trunc(ip))? as usize;
                ip += 1;
            }
            len += 2;
            let low = *input.get(ip).ok_or_else(|| trunc(ip))? as usize;
            ip += 1;
            let dist = ((ctrl & 0x1f) << 8) + low + 1;
            let start = out
                .len()
                .checked_sub(dist)
                .ok_or_else(|| format!("back reference before the start at input byte {ip}"))?;
            if out.len() + len > stage.limit {
                return Err(format!("expands past the chunk size {}", stage.limit));
            }
            if dist >= len {
                out.extend_from_within(start..start + len);
            } else {
                // Overlapping copy: the run repeats the last `dist` bytes.
                for k in 0..len {
                    let b = out[start + k];
                    out.push(b);
                }
            }
        }
    }
    Ok(out)
}
