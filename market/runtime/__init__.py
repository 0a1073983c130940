"""The worker runtime: leases, the worker loop, and the runners that take a claimed
order or job through the pipeline (``market.pipeline``) and persist its outcome."""
