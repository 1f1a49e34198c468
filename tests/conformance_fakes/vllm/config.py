"""vllm/config: VllmConfig and set_current_vllm_config (the context its CustomOp layers are built in); the fake's
hold nothing."""
import contextlib


class VllmConfig:
    model_config = None


@contextlib.contextmanager
def set_current_vllm_config(config):
    yield
