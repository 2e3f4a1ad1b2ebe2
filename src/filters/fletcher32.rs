//! Fletcher-32 filter (id 3): the writer appends the checksum of the chunk as 4 bytes,
//! little-endian (checked against libhdf5 2.0 output). Libraries before 1.6.3 computed a
//! value whose bytes were swapped within each 16-bit half; libhdf5 still accepts that form,
//! and so do we.

use super::Stage;
use crate::io::checksum::fletcher32;

pub(crate) fn decode(mut data: Vec<u8>, _stage: &Stage) -> Result<Vec<u8>, String> {
    let body_len = data
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes cannot hold a checksum", data.len()))?;
    let stored = u32::from_le_bytes([
        data[body_len],
        data[body_len + 1],
        data[body_len + 2],
        data[body_len + 3],
    ]);
    let sum = fletcher32(&data[..body_len]);
    let swapped = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
    if stored != sum && stored != swapped {
        return Err(format!(
            "checksum mismatch: stored {stored:#010x}, computed {sum:#010x}"
        ));
    }
    data.truncate(body_len);
    Ok(data)
}
