//! The part of Thrift's compact protocol that Parquet's page headers and footer need, for
//! writing only: structs of i32, i64, binary and struct fields, and lists of i32,
//! binary and structs.
//!
//! A field is a header byte (the id's delta from the previous field's id in the high
//! nibble, the type in the low one; a long form when the delta is not 1 to 15) and its
//! value; a struct ends with a stop byte 0. Integers are zigzag varints. A list is a
//! header (size in the high nibble up to 14, else 0xF and a varint) and its elements with
//! no field headers. (Thrift's compact protocol specification, `TCompactProtocol`.)

/// Compact protocol type codes of a field or list element.
mod ty {
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const STRUCT: u8 = 12;
}

/// The encoder: bytes so far and, for each open struct, the id of its last field.
#[derive(Default)]
pub struct Writer {
    out: Vec<u8>,
    last: Vec<i16>,
    current: i16,
}

impl Writer {
    /// Start the outermost struct.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes of the finished outermost struct (its stop byte written).
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(0);
        self.out
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn header(&mut self, id: i16, ty: u8) {
        let delta = i32::from(id) - i32::from(self.current);
        if (1..=15).contains(&delta) {
            self.out.push(((delta as u8) << 4) | ty);
        } else {
            self.out.push(ty);
            self.zigzag(i64::from(id));
        }
        self.current = id;
    }

    pub fn i32(&mut self, id: i16, v: i32) {
        self.header(id, ty::I32);
        self.zigzag(i64::from(v));
    }

    pub fn i64(&mut self, id: i16, v: i64) {
        self.header(id, ty::I64);
        self.zigzag(v);
    }

    pub fn binary(&mut self, id: i16, v: &[u8]) {
        self.header(id, ty::BINARY);
        self.varint(v.len() as u64);
        self.out.extend_from_slice(v);
    }

    /// Open a struct field `id`; [`Writer::end`] closes it.
    pub fn begin(&mut self, id: i16) {
        self.header(id, ty::STRUCT);
        self.open();
    }

    fn open(&mut self) {
        self.last.push(self.current);
        self.current = 0;
    }

    /// Close the struct (field, or list element) opened last.
    pub fn end(&mut self) {
        self.out.push(0);
        self.current = self.last.pop().unwrap_or(0);
    }

    fn list(&mut self, id: i16, elem: u8, n: usize) {
        self.header(id, ty::LIST);
        if n < 15 {
            self.out.push(((n as u8) << 4) | elem);
        } else {
            self.out.push(0xf0 | elem);
            self.varint(n as u64);
        }
    }

    pub fn list_i32(&mut self, id: i16, v: &[i32]) {
        self.list(id, ty::I32, v.len());
        for &x in v {
            self.zigzag(i64::from(x));
        }
    }

    pub fn list_binary(&mut self, id: i16, v: &[&[u8]]) {
        self.list(id, ty::BINARY, v.len());
        for x in v {
            self.varint(x.len() as u64);
            self.out.extend_from_slice(x);
        }
    }

    /// A list of `n` structs: each written by `each(self, i)` between its own open and
    /// close.
    pub fn list_struct(&mut self, id: i16, n: usize, mut each: impl FnMut(&mut Self, usize)) {
        self.list(id, ty::STRUCT, n);
        for i in 0..n {
            self.open();
            each(self, i);
            self.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte images worked out by hand from the protocol's rules.
    #[test]
    fn encodes_as_the_compact_protocol_says() {
        let mut w = Writer::new();
        w.i32(1, -1); // delta 1, i32: 0x15; zigzag(-1) = 1
        w.i64(3, 300); // delta 2, i64: 0x26; zigzag(300) = 600 = 0xd8 0x04
        w.binary(20, b"ab"); // delta 17: long form 0x08, zigzag(20) = 40
        w.begin(21); // delta 1, struct: 0x1c
        w.i32(1, 0); // 0x15 0x00
        w.end(); // 0x00
        w.list_i32(22, &[0, 3]); // 0x19, 2 x i32: 0x25, 0x00 0x06
        w.list_struct(23, 16, |w, _| w.i32(2, 0)); // 0x19, 0xfc 0x10, 16 x (0x25 0x00 0x00)
        let got = w.finish();
        let mut want = vec![0x15, 0x01, 0x26, 0xd8, 0x04, 0x08, 0x28, 0x02, b'a', b'b'];
        want.extend([
            0x1c, 0x15, 0x00, 0x00, 0x19, 0x25, 0x00, 0x06, 0x19, 0xfc, 0x10,
        ]);
        for _ in 0..16 {
            want.extend([0x25, 0x00, 0x00]);
        }
        want.push(0x00);
        assert_eq!(got, want);
    }
}
