"""keras: only backend.backend(), as the keras-hub adapter asks which backend runs."""
import types

backend = types.SimpleNamespace(backend=lambda: "torch")
