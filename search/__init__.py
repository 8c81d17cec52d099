"""The read side's pure parts: time expressions in a query (``timeexpr``) and rank fusion with
its configuration (``fusion``). No database code here; the SQL lives in ``store/``."""
