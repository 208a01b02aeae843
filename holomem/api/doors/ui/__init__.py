"""The inspector: HTML pages over one store (``holomem ui``) or a server's tenants
(``holomem serve`` at ``/ui/``); docs/ui.md describes the pages.

Modules: :mod:`.source` (the stores the pages read, and how: writer or follower, one
store or a tenant pool), :mod:`.query` (every query parameter a page takes, checked),
:mod:`.html` (escaping and the page's frame), :mod:`.pages` and :mod:`.forms` (what each
page shows), :mod:`.routes` (the Starlette application: routes, sign-in, the
cross-site checks, headers), :mod:`.running` (``holomem ui`` itself). Like every door it
reaches the store only through ``Memory.call`` and the store's public handle.
"""
