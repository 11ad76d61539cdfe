"""Long-term memory on object storage, shared by replicas: the log as LanceDB tables every
replica appends to (log.py, one table per generation of appends in tables.py, compacted and
their old versions removed by the log pollers in tidy.py) and the snapshots that let the log
drop what they cover, with a replica's cache kept from them (snapshots.py)."""
