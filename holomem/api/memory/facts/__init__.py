"""Stored facts one at a time or a page at a time: records, listing, feedback, confidence."""
