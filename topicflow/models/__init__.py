"""Pure math: numba kernels, model state and statistics. Must not import dask, distributed, zarr or I/O."""
