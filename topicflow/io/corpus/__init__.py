"""The sharded zarr corpus store: layout, writer, reader and id index."""
