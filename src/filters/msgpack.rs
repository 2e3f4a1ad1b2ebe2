//! A minimal msgpack reader, for the headers of Blosc2 frames (see [`super::blosc2`]).
//!
//! msgpack encodes each value as a marker byte, optionally followed by a big-endian length or
//! integer and the payload: positive and negative fixints, fixmap/fixarray/fixstr with the
//! count in the marker, nil, booleans, bin/str/ext with 8/16/32-bit lengths, fixed-size ext,
//! u8-u64 and i8-i64, and array/map with 16/32-bit counts. Floats never occur in a frame
//! header and are refused. The reader borrows from its input, is bounded in nesting depth,
//! and checks every element count against the bytes left (each element takes at least one
//! byte) before allocating, so a hostile count cannot make it allocate more than the input.

/// Nesting accepted: a frame header and its metalayers need 3 levels.
const MAX_DEPTH: usize = 6;

/// The msgpack values a frame header uses.
pub(super) enum Value<'a> {
    Int(i64),
    Bool,
    Nil,
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Ext,
    Array(Vec<Value<'a>>),
    Map(Vec<(Value<'a>, Value<'a>)>),
}

/// A minimal msgpack reader (big-endian integers), bounded in depth; element counts are
/// checked against the bytes left before anything is allocated.
pub(super) struct Msgpack<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Msgpack<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let s = self
            .buf
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or_else(|| format!("msgpack truncated at byte {}", self.pos))?;
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    pub fn value(&mut self, depth: usize) -> Result<Value<'a>, String> {
        if depth > MAX_DEPTH {
            return Err("msgpack nested too deeply".into());
        }
        let m = self.take(1)?[0];
        let int = |v: u64| i64::try_from(v).map_err(|_| "msgpack integer too large".to_string());
        Ok(match m {
            0x00..=0x7f => Value::Int(i64::from(m)),
            0xe0..=0xff => Value::Int(i64::from(m as i8)),
            0x80..=0x8f => self.map(usize::from(m & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(m & 0x0f), depth)?,
            0xa0..=0xbf => Value::Str(self.take(usize::from(m & 0x1f))?),
            0xc0 => Value::Nil,
            0xc2 | 0xc3 => Value::Bool,
            0xc4..=0xc6 => {
                let n = self.uint(1 << (m - 0xc4))? as usize;
                Value::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.uint(1 << (m - 0xc7))? as usize;
                self.take(1 + n)?;
                Value::Ext
            }
            0xcc..=0xcf => Value::Int(int(self.uint(1 << (m - 0xcc))?)?),
            0xd0 => Value::Int(i64::from(self.uint(1)? as u8 as i8)),
            0xd1 => Value::Int(i64::from(self.uint(2)? as u16 as i16)),
            0xd2 => Value::Int(i64::from(self.uint(4)? as u32 as i32)),
            0xd3 => Value::Int(self.uint(8)? as i64),
            0xd4..=0xd8 => {
                self.take(1 + (1 << (m - 0xd4)))?;
                Value::Ext
            }
            0xd9..=0xdb => {
                let n = self.uint(1 << (m - 0xd9))? as usize;
                Value::Str(self.take(n)?)
            }
            0xdc | 0xdd => {
                let n = self.uint(if m == 0xdc { 2 } else { 4 })? as usize;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.uint(if m == 0xde { 2 } else { 4 })? as usize;
                self.map(n, depth)?
            }
            _ => return Err(format!("msgpack marker {m:#04x} at byte {}", self.pos - 1)),
        })
    }

    fn check_count(&self, n: usize) -> Result<(), String> {
        // Every element takes at least one byte.
        if n > self.buf.len().saturating_sub(self.pos) {
            return Err(format!("msgpack count {n} past the end"));
        }
        Ok(())
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        self.check_count(n)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(v))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        self.check_count(n)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            v.push((k, self.value(depth + 1)?));
        }
        Ok(Value::Map(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgpack_is_bounded() {
        let deep = [0x91u8; 64];
        assert!(Msgpack { buf: &deep, pos: 0 }.value(0).is_err());
        let huge = [0xdd, 0xff, 0xff, 0xff, 0xff, 0];
        assert!(Msgpack { buf: &huge, pos: 0 }.value(0).is_err());
        let ints = [0x93, 0xd2, 0xff, 0xff, 0xff, 0xfe, 0xcd, 1, 0, 0xa1, b'x'];
        match (Msgpack { buf: &ints, pos: 0 }).value(0).unwrap() {
            Value::Array(v) => {
                assert!(matches!(v[0], Value::Int(-2)));
                assert!(matches!(v[1], Value::Int(256)));
                assert!(matches!(v[2], Value::Str(b"x")));
            }
            _ => panic!(),
        }
    }
}
