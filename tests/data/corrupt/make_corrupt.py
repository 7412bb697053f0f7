#!/usr/bin/env python3
"""make_corrupt.py - writes tests/data/corrupt/: dense.h5, a small HDF5 file
whose group /training/grads holds 16 links (more than 8: stored densely, in
a fractal heap, in the 1.10 file format), and copies of it with one byte of
that heap's direct block inverted. Run from this directory with h5py on
HDF5 1.10.8 (Debian's python3-h5py); the stored files are the ones
test_golden uses, so run it only to remake them."""
import h5py
import numpy as np

# name -> offset of the inverted byte from the start of the direct block
MUTANTS = {
    "links_block_signature.h5": 0,     # "FHDB"
    "links_block_heap_address.h5": 5,  # the heap header's address
    "links_block_checksum.h5": 17,
    "links_name_length.h5": 23,        # of the first link message, layer_0000
    "links_object_address.h5": 36,     # where layer_0000's header lies
    "links_free_space.h5": 400,        # past the last link message
}

with h5py.File("dense.h5", "w", libver=("v110", "v110")) as f:
    g = f.create_group("training/grads")
    for k in range(16):
        g.create_dataset("layer_%04d" % k, data=np.arange(4, dtype="<f4") + k)
data = open("dense.h5", "rb").read()
assert data.count(b"FHDB") == 1, "expected one fractal heap direct block"
block = data.index(b"FHDB")
for name, at in MUTANTS.items():
    mutant = bytearray(data)
    mutant[block + at] ^= 0xFF
    open(name, "wb").write(mutant)
