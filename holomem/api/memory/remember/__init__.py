"""Remembering: the calls (:mod:`.calls`), what is checked of an input before the store
is consulted (:mod:`.intake`) and the planning of one transaction (:mod:`.planner`)."""
