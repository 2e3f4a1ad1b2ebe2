//! Extended attributes: the dataset description under `user.h5.*` and every HDF5 attribute
//! as `user.<name>`.
//!
//! Values are text. Datasets carry `user.h5.dtype` (numpy-style type string), `user.h5.shape`
//! and `user.h5.maxshape` (Python tuples, `None` for an unlimited dimension or a null
//! dataspace), `user.h5.layout`, `user.h5.filters` (`deflate(4),shuffle`; empty without
//! filters) and, when they apply, `user.h5.chunks`, `user.h5.chunk_index` and
//! `user.h5.fillvalue` (the user-defined fill value rendered like an attribute). An HDF5
//! attribute whose `user.` name would collide with one of these, or would be longer than the
//! kernel's 255-byte xattr name limit, is not shown.
//!
//! The kernel caps xattr values and name lists at 64 KiB; larger ones answer `E2BIG`.
//!
//! Names of the `security.` namespace (SELinux and SMACK labels, file capabilities) and the
//! POSIX ACL names (`system.posix_acl_access`, `system.posix_acl_default`) answer
//! `EOPNOTSUPP`: the filesystem has no security labels and no ACLs (permissions are the
//! modes shown, which the kernel checks itself). `ls -l` asks for every file's SELinux label
//! and ACL; told that the filesystem supports neither, it stops asking for the other files
//! of the same device, which saves two or three round trips per file listed. Any other
//! missing name is `ENODATA`.

use super::error::{FsError, FsResult};
use crate::model::{Attribute, DatasetInfo};

/// Prefix of every name we serve.
pub const USER: &str = "user.";
/// Prefix of the namespace the filesystem does not support (answered `EOPNOTSUPP`).
pub const SECURITY: &str = "security.";
/// The POSIX ACL names (answered `EOPNOTSUPP`).
pub const ACL_NAMES: [&str; 2] = ["system.posix_acl_access", "system.posix_acl_default"];

/// Prefix of the dataset-description names.
pub const H5: &str = "user.h5.";
/// Longest xattr name the kernel accepts.
pub const XATTR_NAME_MAX: usize = 255;
/// Largest xattr value or name list the kernel accepts.
pub const XATTR_SIZE_MAX: usize = 65536;

/// Whether `name` is of what the filesystem does not support at all (security labels,
/// ACLs), answered `EOPNOTSUPP` rather than `ENODATA` (see the module docs).
pub fn unsupported(name: &std::ffi::OsStr) -> bool {
    let b = name.as_encoded_bytes();
    b.starts_with(SECURITY.as_bytes()) || ACL_NAMES.iter().any(|a| b == a.as_bytes())
}

/// The `user.h5.*` entries of a dataset, in a fixed order.
pub fn dataset_xattrs(info: &DatasetInfo) -> Vec<(String, String)> {
    let mut v = vec![
        ("dtype", info.dtype.numpy_str()),
        (
            "shape",
            if info.null {
                "None".into()
            } else {
                tuple(&info.shape)
            },
        ),
        (
            "maxshape",
            if info.null {
                "None".into()
            } else {
                tuple(info.max_shape.as_deref().unwrap_or(&info.shape))
            },
        ),
        ("layout", info.layout.to_string()),
        ("filters", filters(&info.filters)),
    ];
    if let Some(chunks) = &info.chunk_shape {
        v.push(("chunks", tuple(chunks)));
    }
    if let Some(index) = info.chunk_index {
        v.push(("chunk_index", index.to_string()));
    }
    if let Some(fill) = &info.fill_value {
        let attr = Attribute {
            name: String::new(),
            dtype: info.dtype.clone(),
            shape: Some(Vec::new()),
            raw: fill.clone(),
            strings: None,
        };
        v.push(("fillvalue", attr.render()));
    }
    v.into_iter()
        .map(|(k, val)| (format!("{H5}{k}"), val))
        .collect()
}

pub use crate::model::value::{filters_text as filters, shape_text as tuple};

/// Whether an HDF5 attribute can be served as `user.<name>`.
pub fn attr_visible(name: &str) -> bool {
    let full = USER.len() + name.len();
    full <= XATTR_NAME_MAX && !name.is_empty() && !name.contains('\0') && !name.starts_with("h5.")
}

/// What `getxattr`/`listxattr` answer.
#[derive(Debug, PartialEq, Eq)]
pub enum XattrReply {
    /// The caller asked for the size only.
    Size(u32),
    Data(Vec<u8>),
}

/// Answer a size query (`size == 0`) or a read into a buffer of `size` bytes.
pub fn reply(value: Vec<u8>, size: u32) -> FsResult<XattrReply> {
    if value.len() > XATTR_SIZE_MAX {
        return Err(FsError::Errno(libc::E2BIG));
    }
    if size == 0 {
        // Fits in u32: checked against XATTR_SIZE_MAX above.
        Ok(XattrReply::Size(value.len() as u32))
    } else if value.len() > size as usize {
        Err(FsError::Errno(libc::ERANGE))
    } else {
        Ok(XattrReply::Data(value))
    }
}

/// The NUL-separated name list `listxattr` returns.
pub fn name_list<'a>(names: impl Iterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::messages::filter_pipeline::FilterSpec;

    #[test]
    fn tuples_like_python() {
        assert_eq!(tuple(&[]), "()");
        assert_eq!(tuple(&[5]), "(5,)");
        assert_eq!(tuple(&[3, 4]), "(3, 4)");
        assert_eq!(tuple(&[u64::MAX, 4]), "(None, 4)");
    }

    #[test]
    fn filter_rendering() {
        let f = |id, cd: &[u32], name: Option<&str>| FilterSpec {
            id,
            flags: 0,
            name: name.map(String::from),
            client_data: cd.to_vec(),
        };
        assert_eq!(
            filters(&[f(2, &[4], None), f(1, &[4], Some("deflate"))]),
            "shuffle,deflate(4)"
        );
        assert_eq!(
            filters(&[f(32000, &[0, 0, 400], Some("lzf"))]),
            "lzf(0,0,400)"
        );
        assert_eq!(filters(&[f(32015, &[], None)]), "zstd");
        assert_eq!(filters(&[f(40000, &[], None)]), "filter40000");
        assert_eq!(filters(&[]), "");
    }

    #[test]
    fn size_queries_and_erange() {
        assert_eq!(reply(b"abc".to_vec(), 0).unwrap(), XattrReply::Size(3));
        assert_eq!(
            reply(b"abc".to_vec(), 3).unwrap(),
            XattrReply::Data(b"abc".to_vec())
        );
        assert_eq!(reply(b"abc".to_vec(), 2).unwrap_err().errno(), libc::ERANGE);
        let big = vec![0u8; XATTR_SIZE_MAX + 1];
        assert_eq!(reply(big, 0).unwrap_err().errno(), libc::E2BIG);
        assert_eq!(name_list(["a", "bc"].into_iter()), b"a\0bc\0");
    }

    #[test]
    fn attribute_names() {
        assert!(attr_visible("units"));
        assert!(!attr_visible("h5.dtype"));
        assert!(!attr_visible(""));
        assert!(!attr_visible(&"n".repeat(251)));
        assert!(attr_visible(&"n".repeat(250)));
    }
}
