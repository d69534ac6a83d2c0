"""Archive storage: catalog, segment files, mark file, crash recovery, maintenance (file formats of Aeron Archive)."""
