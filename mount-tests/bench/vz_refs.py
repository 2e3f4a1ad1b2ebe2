"""A kerchunk (version 1) manifest of one HDF5 file by VirtualiZarr's HDF5 parser, for the
benches that set it beside `h5mount refs` (refs_coverage.py, remote_refs.py).

VirtualiZarr 2.x writes kerchunk references of a dataset (`.vz.to_kerchunk`), not of a
datatree; so the file is parsed once (HDFParser with its default reader, as
open_virtual_datatree calls it), and each group's virtual dataset is written and its refs
put under the group's path. Where the datatree refuses the file (a group whose unlabelled,
"phony" dimensions differ from its parent's, as in most files not written as netCDF), the
parsed manifest's groups are taken one by one (ManifestGroup's own walk); that is said in
the note returned.
"""


def kerchunk_refs(url, registry):
    """(refs dict, note) of the file at `url` (resolved by the obstore `registry`)."""
    from virtualizarr.parsers import HDFParser
    store = HDFParser()(url, registry)
    note = ""
    try:
        groups = {n.path.strip("/"): n.to_dataset(inherit=False)
                  for n in store.to_virtual_datatree().subtree}
    except ValueError as e:
        note = ("its datatree refused the file (" + str(e).splitlines()[0][:60]
                + "): the parsed groups written one by one")
        groups = store._group.to_virtual_datasets()
    refs = {}
    for prefix, ds in groups.items():
        for k, v in ds.vz.to_kerchunk(format="dict")["refs"].items():
            refs[f"{prefix}/{k}" if prefix else k] = v
    return refs, note


def local_registry():
    """A registry of the local filesystem (file:// URLs)."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    return ObjectStoreRegistry({"file://": LocalStore()})
