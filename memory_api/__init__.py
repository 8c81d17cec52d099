"""The memory API as an HTTP service (FastAPI) and its client (httpx).

Routes (JSON; every request but /v1/health counts against the caller's budget, identified by the
``X-Pmem-Client`` header; beyond it the answer is 429 with ``Retry-After``):

    GET  /v1/health
    POST /v1/search           {"query", "limit"}                  → {"hits": [...]} (the query
                              understood as `pmem search` understands it: search.service)
    POST /v1/related          {"conversation_keys", "titles"}     → {"items": [...]}
    POST /v1/proposals        {"run_id", "batch_id", "draft_id", "payload"} → {"proposal_id"}
    POST /v1/commits          CommitRequest (expected_revision, idempotency_key)
                              → CommitResult | 409 stale_revision {current} | 410 tombstoned | 404
    GET  /v1/memories/{id}    ?history=true                       → MemoryView
"""
