"""Log sources. Each source module lists its input files, fetches them to local disk, and names
the ``RecordFormat`` that normalizes them; ``sentinel.ingest`` does the rest."""
