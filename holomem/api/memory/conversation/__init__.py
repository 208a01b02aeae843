"""Conversations (docs/contract.md §4g): the shapes (:mod:`.types`), what a message
becomes (:mod:`.messages`), the links between turns and what was extracted from them
(:mod:`.links`), and the call (:mod:`.calls`)."""
