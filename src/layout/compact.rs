//! Layout: compact storage.
//!
//! The raw data lives in the data layout message itself (spec: "Data Layout Message", layout
//! class 0), so a read is a copy out of the message bytes. The stored size must be exactly the
//! dataset's byte length; anything else is a corrupt file.

use crate::error::{Error, Result};

/// A compact dataset's bytes.
#[derive(Debug)]
pub(crate) struct Compact {
    data: Vec<u8>,
}

impl Compact {
    /// `len` is the dataset's byte length, `id` its object header address (for errors).
    pub(crate) fn new(data: Vec<u8>, len: u64, id: u64) -> Result<Compact> {
        if data.len() as u64 != len {
            return Err(Error::corrupt(
                "compact layout",
                id,
                format!("{} bytes stored for a dataset of {len} bytes", data.len()),
            ));
        }
        Ok(Compact { data })
    }

    /// Fill `buf` from `offset`; the caller has clipped the range to the dataset.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.data.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| Error::Invalid(format!("compact read at {offset} out of range")))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_must_match() {
        assert!(matches!(
            Compact::new(vec![1, 2, 3], 4, 0x30),
            Err(Error::Corrupt { addr: 0x30, .. })
        ));
        let c = Compact::new(vec![1, 2, 3, 4], 4, 0).unwrap();
        let mut b = [0u8; 2];
        c.read(1, &mut b).unwrap();
        assert_eq!(b, [2, 3]);
        assert!(c.read(3, &mut b).is_err());
    }
}
