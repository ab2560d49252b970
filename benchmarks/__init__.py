"""MemoryScope benchmarks: LoCoMo retrieval recall, latency at scale, ingest throughput.

Run each as a module from the repository root, e.g.
`python -m benchmarks.locomo_retrieval --data ../shared/data/locomo --out benchmarks/results/locomo.json`.
See `benchmarks/README.md` for every command, the output contracts and the latest numbers.
"""
