//! A group's links, held compactly: what [`super::File::links`] caches and hands out.
//!
//! A group may hold millions of links, and its list is kept while the group is in use, so
//! each link costs a few bytes beyond its name rather than a struct of strings: every name is
//! in one string, one after another, with a `u32` end offset per link; a hard link (nearly
//! all of them) is its object's address, a `u64`; the few soft, external and user-defined
//! links are kept whole beside, by position. Creation orders are kept only for groups that
//! track them for every link (the only use is the creation-order listing). The list is
//! sorted by name, byte by byte, so a name is found by binary search.
//!
//! [`Links::iter`] and [`Links::get`] give [`LinkRef`]s: the name borrowed, the target
//! rebuilt (a copy of the strings only for the rare non-hard links).
//!
//! A file keeps the lists it read in a [`LinksCache`], bounded by count and by bytes; the
//! list used last is kept even when it alone is over the bound, so the lookups of a walk in
//! a group of millions of links do not read the group again each time.

use std::sync::Arc;

use lru::LruCache;

use super::group::{Link, LinkTarget};
use super::ObjectId;
use crate::error::{Error, Result};

/// Group link lists a file keeps, at most.
pub const LINKS_CACHE_ENTRIES: usize = 1024;
/// Bytes of link lists a file keeps ([`Links::bytes`]), at most: beyond, the lists used
/// longest ago go, all but the last one.
pub const LINKS_CACHE_BYTES: usize = 8 << 20;

/// The link lists of a file's groups, by header address (see the module docs).
pub struct LinksCache {
    lru: LruCache<u64, Arc<Links>>,
    bytes: usize,
}

impl Default for LinksCache {
    fn default() -> Self {
        LinksCache::new()
    }
}

impl LinksCache {
    /// An empty cache.
    pub fn new() -> LinksCache {
        LinksCache {
            lru: LruCache::unbounded(),
            bytes: 0,
        }
    }

    /// The list of `group`, marked as used.
    pub fn get(&mut self, group: u64) -> Option<Arc<Links>> {
        self.lru.get(&group).cloned()
    }

    /// Whether the list of `group` is kept.
    pub fn contains(&self, group: u64) -> bool {
        self.lru.contains(&group)
    }

    /// Keep `links` as the list of `group`; older lists go while over the bounds.
    pub fn put(&mut self, group: u64, links: Arc<Links>) {
        self.bytes = self.bytes.saturating_add(links.bytes());
        if let Some(old) = self.lru.put(group, links) {
            self.bytes = self.bytes.saturating_sub(old.bytes());
        }
        while self.lru.len() > 1
            && (self.bytes > LINKS_CACHE_BYTES || self.lru.len() > LINKS_CACHE_ENTRIES)
        {
            match self.lru.pop_lru() {
                Some((_, old)) => self.bytes = self.bytes.saturating_sub(old.bytes()),
                None => break,
            }
        }
    }

    /// Drop the list of `group`.
    pub fn remove(&mut self, group: u64) {
        if let Some(old) = self.lru.pop(&group) {
            self.bytes = self.bytes.saturating_sub(old.bytes());
        }
    }

    /// Bytes of the lists kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A group's links, sorted by name (see the module docs).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Links {
    /// Every name, in order.
    names: String,
    /// End of each name in `names` (a name starts where the one before it ends).
    ends: Vec<u32>,
    /// Each hard link's object address (0 for the other links).
    targets: Vec<u64>,
    /// The links that are not hard links, by position (sorted by it).
    others: Vec<(u32, LinkTarget)>,
    /// Every link's creation order, when every link has one.
    orders: Option<Vec<u64>>,
}

/// One link of a [`Links`]: the name borrowed from the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRef<'a> {
    pub name: &'a str,
    pub creation_order: Option<u64>,
    pub target: LinkTarget,
}

impl LinkRef<'_> {
    /// This link as an owned [`Link`].
    pub fn to_link(&self) -> Link {
        Link {
            name: self.name.to_string(),
            creation_order: self.creation_order,
            target: self.target.clone(),
        }
    }
}

impl Links {
    /// Number of links.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True for a group without links.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The name of link `i` (`""` past the end).
    pub fn name(&self, i: usize) -> &str {
        let start = match i.checked_sub(1) {
            Some(p) => self.ends.get(p).copied().unwrap_or(0),
            None => 0,
        };
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.names.get(start as usize..end as usize).unwrap_or("")
    }

    /// Link `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<LinkRef<'_>> {
        let addr = *self.targets.get(i)?;
        let pos = u32::try_from(i).ok()?;
        let target = match self.others.binary_search_by_key(&pos, |(p, _)| *p) {
            Ok(k) => self.others[k].1.clone(),
            Err(_) => LinkTarget::Hard(ObjectId(addr)),
        };
        Some(LinkRef {
            name: self.name(i),
            creation_order: self.orders.as_ref().and_then(|o| o.get(i).copied()),
            target,
        })
    }

    /// Every link, in name order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = LinkRef<'_>> + ExactSizeIterator + '_ {
        (0..self.len()).map(move |i| {
            // Every index below len() has a link.
            self.get(i).unwrap_or(LinkRef {
                name: "",
                creation_order: None,
                target: LinkTarget::UserDefined(0),
            })
        })
    }

    /// The index of the link named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.name(mid).as_bytes().cmp(name.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The link named `name`.
    pub fn find(&self, name: &str) -> Option<LinkRef<'_>> {
        self.get(self.position(name)?)
    }

    /// Every link as an owned [`Link`], in name order.
    pub fn to_vec(&self) -> Vec<Link> {
        self.iter().map(|l| l.to_link()).collect()
    }

    /// True when every link has a creation order.
    pub fn tracks_order(&self) -> bool {
        self.orders.is_some()
    }

    /// The memory this list takes, about: what a cache weighs it by.
    pub fn bytes(&self) -> usize {
        let others: usize = self
            .others
            .iter()
            .map(|(_, t)| {
                std::mem::size_of::<(u32, LinkTarget)>()
                    + match t {
                        LinkTarget::Soft(s) => s.len(),
                        LinkTarget::External { file, path } => file.len() + path.len(),
                        _ => 0,
                    }
            })
            .sum();
        std::mem::size_of::<Links>()
            + self.names.capacity()
            + self.ends.capacity() * 4
            + self.targets.capacity() * 8
            + self.orders.as_ref().map_or(0, |o| o.capacity() * 8)
            + others
    }
}

impl FromIterator<Link> for Links {
    /// A list of `links` (sorted here). Test helper and for small lists built by hand: a list
    /// too large for the offsets ([`LinksBuilder::push`]) keeps its first links.
    fn from_iter<I: IntoIterator<Item = Link>>(links: I) -> Links {
        let mut b = LinksBuilder::new(0);
        for l in links {
            if b.push(&l.name, l.creation_order, l.target).is_err() {
                break;
            }
        }
        b.finish()
    }
}

/// Builds a [`Links`] from links in any order.
#[derive(Debug)]
pub struct LinksBuilder {
    /// Header address of the group, for errors.
    group: u64,
    names: String,
    ends: Vec<u32>,
    targets: Vec<u64>,
    others: Vec<(u32, LinkTarget)>,
    orders: Vec<u64>,
    /// Some link had no creation order.
    unordered: bool,
}

impl LinksBuilder {
    /// An empty list of the group whose header is at `group`.
    pub fn new(group: u64) -> LinksBuilder {
        LinksBuilder {
            group,
            names: String::new(),
            ends: Vec::new(),
            targets: Vec::new(),
            others: Vec::new(),
            orders: Vec::new(),
            unordered: false,
        }
    }

    /// Links added so far.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when no link was added.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Add a link; an error when the names would pass 4 GiB (the offsets are `u32`).
    pub fn push(
        &mut self,
        name: &str,
        creation_order: Option<u64>,
        target: LinkTarget,
    ) -> Result<()> {
        let end = self
            .names
            .len()
            .checked_add(name.len())
            .and_then(|e| u32::try_from(e).ok())
            .ok_or_else(|| {
                Error::limit("link names", self.group, "more than 4 GiB of link names")
            })?;
        let pos = u32::try_from(self.ends.len())
            .map_err(|_| Error::limit("links", self.group, "more than 2^32 links"))?;
        self.names.push_str(name);
        self.ends.push(end);
        match target {
            LinkTarget::Hard(id) => self.targets.push(id.0),
            other => {
                self.targets.push(0);
                self.others.push((pos, other));
            }
        }
        match creation_order {
            Some(o) if !self.unordered => self.orders.push(o),
            Some(_) => {}
            None => {
                self.unordered = true;
                self.orders = Vec::new();
            }
        }
        Ok(())
    }

    /// The list, sorted by name (byte order; equal names keep their order).
    pub fn finish(self) -> Links {
        let n = self.ends.len();
        let name = |i: usize| -> &[u8] {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.names.as_bytes()[start..self.ends[i] as usize]
        };
        let sorted = (1..n).all(|i| name(i - 1) <= name(i));
        let orders = (!self.unordered).then_some(self.orders);
        if sorted {
            let mut names = self.names;
            names.shrink_to_fit();
            let (mut ends, mut targets) = (self.ends, self.targets);
            ends.shrink_to_fit();
            targets.shrink_to_fit();
            return Links {
                names,
                ends,
                targets,
                others: self.others,
                orders,
            };
        }
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.sort_by(|&a, &b| name(a as usize).cmp(name(b as usize)));
        let mut names = String::with_capacity(self.names.len());
        let mut ends = Vec::with_capacity(n);
        let mut targets = Vec::with_capacity(n);
        let mut others = Vec::with_capacity(self.others.len());
        for (new, &old) in perm.iter().enumerate() {
            let old = old as usize;
            let start = if old == 0 {
                0
            } else {
                self.ends[old - 1] as usize
            };
            names.push_str(&self.names[start..self.ends[old] as usize]);
            // The total is the builder's, which fit in u32.
            ends.push(names.len() as u32);
            targets.push(self.targets[old]);
            if let Ok(k) = self.others.binary_search_by_key(&(old as u32), |(p, _)| *p) {
                others.push((new as u32, self.others[k].1.clone()));
            }
        }
        let orders = orders.map(|o| perm.iter().map(|&i| o[i as usize]).collect());
        Links {
            names,
            ends,
            targets,
            others,
            orders,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, target: LinkTarget, order: Option<u64>) -> Link {
        Link {
            name: name.into(),
            creation_order: order,
            target,
        }
    }

    #[test]
    fn sorted_by_name_targets_and_orders_kept() {
        let ext = LinkTarget::External {
            file: "o.h5".into(),
            path: "/x".into(),
        };
        let given = vec![
            link("b", LinkTarget::Hard(ObjectId(800)), Some(2)),
            link("a", LinkTarget::Soft("/b".into()), Some(1)),
            link("é", ext.clone(), Some(0)),
            link("B", LinkTarget::Hard(ObjectId(96)), Some(3)),
        ];
        let l: Links = given.clone().into_iter().collect();
        let names: Vec<&str> = l.iter().map(|r| r.name).collect();
        assert_eq!(names, ["B", "a", "b", "é"], "byte order");
        assert_eq!(l.find("a").unwrap().target, LinkTarget::Soft("/b".into()));
        assert_eq!(l.find("é").unwrap().target, ext);
        assert_eq!(l.find("b").unwrap().target, LinkTarget::Hard(ObjectId(800)));
        assert_eq!(l.find("b").unwrap().creation_order, Some(2));
        assert_eq!(l.position("c"), None);
        assert_eq!(l.position("B"), Some(0));
        let mut back = l.to_vec();
        back.sort_by_key(|x| x.creation_order);
        let mut want = given;
        want.sort_by_key(|x| x.creation_order);
        assert_eq!(back, want);
        assert!(l.tracks_order());
        assert_eq!(l.name(99), "");
        assert!(l.get(4).is_none());
    }

    #[test]
    fn one_link_without_an_order_drops_them_all() {
        let l: Links = vec![
            link("a", LinkTarget::Hard(ObjectId(1)), Some(0)),
            link("b", LinkTarget::Hard(ObjectId(2)), None),
        ]
        .into_iter()
        .collect();
        assert!(!l.tracks_order());
        assert!(l.iter().all(|r| r.creation_order.is_none()));
        assert!(Links::default().is_empty());
    }

    #[test]
    fn the_cache_keeps_its_bound_and_always_the_last_list() {
        let list = |n: u64| {
            let mut b = LinksBuilder::new(0);
            for i in 0..n {
                b.push(&format!("n{i:07}"), None, LinkTarget::Hard(ObjectId(i)))
                    .unwrap();
            }
            Arc::new(b.finish())
        };
        let mut c = LinksCache::new();
        let small = list(100);
        for g in 0..LINKS_CACHE_ENTRIES as u64 + 10 {
            c.put(g, small.clone());
        }
        assert!(!c.contains(0) && c.contains(LINKS_CACHE_ENTRIES as u64 + 9));
        let big = list(1_000_000);
        assert!(big.bytes() > LINKS_CACHE_BYTES);
        c.put(1 << 40, big.clone());
        assert!(c.contains(1 << 40), "the last list stays, however large");
        assert_eq!(c.bytes(), big.bytes(), "alone");
        c.put(7, small.clone());
        assert!(!c.contains(1 << 40) && c.contains(7));
        assert!(c.bytes() <= LINKS_CACHE_BYTES);
    }

    #[test]
    fn a_million_links_take_a_few_bytes_beyond_their_names() {
        let mut b = LinksBuilder::new(0);
        for i in (0..1_000_000u64).rev() {
            b.push(
                &format!("d{i:07}"),
                None,
                LinkTarget::Hard(ObjectId(i * 300)),
            )
            .unwrap();
        }
        let l = b.finish();
        assert_eq!(l.len(), 1_000_000);
        assert_eq!(l.name(0), "d0000000");
        assert_eq!(
            l.find("d0123456").unwrap().target,
            LinkTarget::Hard(ObjectId(123_456 * 300))
        );
        assert!(l.bytes() < 21_000_000, "{} bytes", l.bytes());
    }
}
