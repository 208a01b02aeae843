"""The HTTP door, ``holomem serve`` (docs/http.md): routes, tenants, guards, OpenAPI."""
