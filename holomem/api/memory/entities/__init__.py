"""What is known about a name (docs/contract.md §4h): the shapes (:mod:`.types`), the
profile read from one view (:mod:`.profile`) and the call (:mod:`.calls`)."""
