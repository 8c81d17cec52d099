"""The offline extractive drafter: no model, no network, deterministic.

It builds one case record per conversation from the person's own sentences: the background
(their first statements), the decision, the reasons, the result and what is still open, with
evidence pointers whose quote hints are copied exactly from the source messages.

The secret guard runs first, on the whole conversation (``core.secrets.redact_conversation``):
everything below (sentences, the title, aliases, tags) is cut from the redacted text, so a key
cannot lose its ``sk-`` prefix, split at ``/`` or be lower-cased into a tag and slip through.
A sentence that held a secret is never offered as evidence.

Modules, by responsibility (each imports only those above it):

* ``sentences``: sentence splitting and shared text helpers;
* ``roles``: the role of each sentence and the case parts;
* ``titles``: titles, salient terms, aliases, tags;
* ``change``: append or create (the change of mind found by meaning);
* ``pairing``: the change of mind decided: the append gate's candidate and the revisit of its
  decision (and the learned pair model, a report of ``bench/fit_pairing.py`` only);
* ``drafter``: the record itself and :class:`ExtractiveDrafter`.
"""

from providers.extractive.change import changed_memory
from providers.extractive.drafter import MODEL, ExtractiveDrafter, draft_record, draft_records
from providers.extractive.sentences import (
    Sentence,
    detect_language,
    person_sentences,
    split_sentences,
)
from providers.extractive.titles import salient_terms

__all__ = [
    "MODEL",
    "ExtractiveDrafter",
    "Sentence",
    "changed_memory",
    "detect_language",
    "draft_record",
    "draft_records",
    "person_sentences",
    "salient_terms",
    "split_sentences",
]
