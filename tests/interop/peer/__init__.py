"""The Java interop peer (test code, never shipped): ``java/`` (the Aeron 1.15.1 program),
``fetch-java-peer`` (fetches the jar and a Java 11 runtime, builds it) and ``interop_peer``
(its Python driver, what tests and benchmarks import). See docs/interop.md."""
