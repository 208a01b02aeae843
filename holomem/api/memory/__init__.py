"""The memory tier: ``Memory`` (:mod:`.memory`), the :class:`~.session.Session` its calls
share, one package per concept (each with its ``calls`` module), the JSON contract
(:mod:`.contract`), and the shapes and checks the concepts share (:mod:`.types`,
:mod:`.checks`, :mod:`.filters`, :mod:`.policies`). Imports the engine tier; the
doors import it."""
