use super::*;

/// Hand `node` out once, as a lookup answer would; the node back.
fn shown(t: &InodeTable, node: Arc<Node>) -> Arc<Node> {
    t.remember(&node);
    node
}

#[test]
fn objects_share_inodes_and_links_get_their_own() {
    let t = InodeTable::new(0, ObjectId(96));
    let root = t.get(ROOT_INO).unwrap();
    assert_eq!(root.object(), Some(ObjectId(96)));
    assert_eq!(root.path, "/");
    let a = shown(&t, t.object(&root, "a", ObjectId(800)));
    assert_eq!(a.ino, 802);
    assert_eq!(a.path, "/a");
    let b = t.object(&root, "b", ObjectId(800));
    assert_eq!(b.ino, 802, "hard links share the inode");
    assert_eq!(b.path, "/a", "first path wins while it is known");
    // A hard link back to the root is the root.
    assert_eq!(t.object(&a, "up", ObjectId(96)).ino, ROOT_INO);
    let s1 = shown(&t, t.symlink(&a, "s", "x".into()));
    let s2 = shown(&t, t.symlink(&root, "s", "x".into()));
    assert!(s1.ino >= LINK_BASE && s2.ino >= LINK_BASE && s1.ino != s2.ino);
    let again = t.symlink(&a, "s", "y".into());
    assert_eq!(again.ino, s1.ino, "stable per (parent, name)");
    assert_eq!(again.kind, NodeKind::Symlink { target: "y".into() });
    assert_eq!(s1.path, "/a/s");
    let huge = shown(&t, t.object(&root, "h", ObjectId(u64::MAX)));
    assert!((COUNTER_BASE..LINK_BASE).contains(&huge.ino));
    let high = shown(&t, t.object(&root, "hi", ObjectId(EXTERNAL_BASE)));
    assert!(
        (COUNTER_BASE..LINK_BASE).contains(&high.ino),
        "main addresses never reach the external range"
    );
    assert_eq!(
        t.get(high.ino).unwrap().object(),
        Some(ObjectId(EXTERNAL_BASE))
    );
    assert_eq!(t.len(), 6);
    // The same address in another file is another object, numbered from its address.
    let ext = shown(&t, t.object_in(&root, "x", 1, ObjectId(800), None));
    assert_eq!(ext.ino, EXTERNAL_BASE + (1 << 40) + 800);
    assert_eq!(ext.file, 1);
    let inside = shown(&t, t.object(&ext, "y", ObjectId(900)));
    assert_eq!(inside.file, 1, "children live in their parent's file");
    assert_eq!(inside.ino, ext.ino + 100);
    assert_eq!(
        t.object_in(&a, "again", 1, ObjectId(800), None).ino,
        ext.ino
    );
    assert_eq!(t.object_of_number(inside.ino), Some((1, ObjectId(900))));
    assert_eq!(t.object_of_number(802), Some((0, ObjectId(800))));
    assert_eq!(t.object_of_number(s1.ino), None);
    // An address too large for its file's range is counted.
    let far = t.object_in(&root, "far", 1, ObjectId(1 << 40), None);
    assert!((COUNTER_BASE..LINK_BASE).contains(&far.ino));
}

#[test]
fn nothing_is_kept_until_handed_out_and_forgotten_inodes_go() {
    let t = InodeTable::new(0, ObjectId(96));
    let root = t.get(ROOT_INO).unwrap();
    let g = t.object(&root, "g", ObjectId(1000));
    assert!(t.get(g.ino).is_none(), "made, not handed out");
    assert_eq!(t.len(), 1);
    t.remember(&g);
    t.remember(&g);
    let mut kids = Vec::new();
    for i in 0..1000u64 {
        let d = t.object(&g, &format!("d{i:04}"), ObjectId(2000 + 8 * i));
        t.remember(&d);
        kids.push(d);
    }
    assert_eq!(t.len(), 1002);
    assert_eq!(t.get(kids[7].ino).unwrap().path, "/g/d0007");
    // The kernel forgets the group first (its dentries may go in any order): it stays
    // while its children are known.
    assert!(t.forget(g.ino, 2).is_empty());
    assert!(t.get(g.ino).is_some());
    for (i, d) in kids.iter().enumerate() {
        let gone = t.forget(d.ino, 1);
        if i + 1 < kids.len() {
            assert_eq!(gone, vec![d.ino]);
        } else {
            assert_eq!(
                gone,
                vec![d.ino, g.ino],
                "the last child takes the group along"
            );
        }
    }
    assert_eq!(t.len(), 1, "only the root is left");
    assert!(t.forget(ROOT_INO, 1).is_empty() && t.get(ROOT_INO).is_some());
    assert!(
        t.forget(12345, 1).is_empty(),
        "an unknown number is no error"
    );
    // Found again: the same numbers, the same paths.
    let g2 = shown(&t, t.object(&root, "g", ObjectId(1000)));
    let d7 = shown(&t, t.object(&g2, "d0007", ObjectId(2056)));
    assert_eq!((g2.ino, d7.ino), (g.ino, kids[7].ino));
    assert_eq!(t.get(d7.ino).unwrap().path, "/g/d0007");
}

#[test]
fn counts_add_up_and_saturate() {
    let t = InodeTable::new(0, ObjectId(96));
    let root = t.get(ROOT_INO).unwrap();
    let d = t.object(&root, "d", ObjectId(500));
    for _ in 0..3 {
        t.remember(&d);
    }
    assert!(t.forget(d.ino, 2).is_empty());
    assert_eq!(t.forget(d.ino, 1), vec![d.ino]);
    // A pin (a sidecar) keeps it known without any lookup.
    t.pin(&d);
    assert!(t.get(d.ino).is_some());
    t.remember(&d);
    assert!(t.forget(d.ino, 1).is_empty());
    assert_eq!(t.unpin(d.ino), vec![d.ino]);
    // A count the kernel may pass is never wrongly taken back to zero.
    t.remember(&d);
    {
        let mut w = t.write();
        w.store.get_mut(d.ino).unwrap().lookups = u32::MAX - 1;
    }
    t.remember(&d);
    t.remember(&d);
    assert!(t.forget(d.ino, u64::MAX).is_empty());
    assert!(t.get(d.ino).is_some(), "saturated: kept for the mount");
}

#[test]
fn counted_numbers_stay_while_reserved() {
    let t = InodeTable::for_directory();
    let root = t.get(ROOT_INO).unwrap();
    assert_eq!(root.kind, NodeKind::HostDir { rel: "".into() });
    let dir = |name: &str| NodeKind::HostDir { rel: name.into() };
    // Numbered by a listing, handed out later: the same number.
    let listed = t.host(&root, "run", dir("run"), FileIdx::MAX);
    assert!(t.get(listed.ino).is_none());
    let run = shown(&t, t.host(&root, "run", dir("run"), FileIdx::MAX));
    assert_eq!(run.ino, listed.ino);
    let file = NodeKind::FileRoot {
        rel: "run/a.h5".into(),
    };
    let a = shown(&t, t.host(&run, "a.h5", file.clone(), 3));
    assert_eq!(a.path, "/run/a.h5");
    assert_eq!(a.host_path(), Some(std::path::Path::new("run/a.h5")));
    assert_eq!(t.file_root(3).map(|n| n.ino), Some(a.ino));
    let anchor = a.anchor.clone().unwrap();
    assert_eq!(
        (anchor.file_name.as_str(), anchor.mount_path.as_str()),
        ("run/a.h5", "/run/a.h5")
    );
    // Objects inside the file keep its anchor, not stored again.
    let inner = shown(&t, t.object(&a, "entry", ObjectId(4096)));
    assert_eq!(inner.ino, EXTERNAL_BASE + (3 << 40) + 4096);
    let got = t.get(inner.ino).unwrap();
    assert_eq!(got.path, "/run/a.h5/entry");
    assert!(Arc::ptr_eq(got.anchor.as_ref().unwrap(), &anchor));
    assert_eq!(t.read().anchors.len(), 1);
    // Forgotten, and found again: the same number.
    for n in [&inner, &a, &run] {
        t.forget(n.ino, 1);
    }
    assert_eq!(t.len(), 1);
    assert!(t.file_root(3).is_none());
    let run2 = t.host(&root, "run", dir("run"), FileIdx::MAX);
    assert_eq!(run2.ino, run.ino);
    assert_eq!(t.host(&run2, "a.h5", file, 3).ino, a.ino);
    // A file become a directory is another inode.
    let other = t.host(&run2, "a.h5", dir("run/a.h5"), FileIdx::MAX);
    assert_ne!(other.ino, a.ino);
}

#[test]
fn a_refresh_rebinds_where_the_object_is_found_now() {
    let t = InodeTable::new(0, ObjectId(96));
    let root = t.get(ROOT_INO).unwrap();
    let g = shown(&t, t.object(&root, "g", ObjectId(1000)));
    let h = shown(&t, t.object(&root, "h", ObjectId(1100)));
    let d = shown(&t, t.object(&g, "d", ObjectId(2000)));
    t.mark_before_refresh();
    assert!(t.get(d.ino).unwrap().before_refresh);
    assert!(!t.get(ROOT_INO).unwrap().before_refresh);
    let moved = t.rebind(&t.get(d.ino).unwrap(), &h, "e");
    assert_eq!(moved.path, "/h/e");
    let now = t.get(d.ino).unwrap();
    assert_eq!(
        (now.path.as_str(), now.parent, now.before_refresh),
        ("/h/e", h.ino, false)
    );
    // The old parent lost the pin: forgotten, it goes.
    assert_eq!(t.forget(g.ino, 1), vec![g.ino]);
    assert_eq!(t.forget(h.ino, 1), Vec::<u64>::new(), "kept by /h/e");
}

#[test]
fn a_record_is_small() {
    // Slab record plus its index slot, before the table's spare room.
    let per = std::mem::size_of::<Option<Record>>() + std::mem::size_of::<u32>();
    assert!(per <= 60, "{per} bytes");
}

#[test]
fn the_zarr_tree_keeps_every_node() {
    let t = InodeTable::new(0, ObjectId(96));
    t.keep_all();
    let root = t.get(ROOT_INO).unwrap();
    let g = t.object(&root, "g", ObjectId(1000));
    assert!(t.get(g.ino).is_some(), "kept at once");
    assert!(t.forget(g.ino, 1).is_empty());
    assert!(t.get(g.ino).is_some());
}
