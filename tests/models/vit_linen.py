"""A test model shaped as public Flax Linen vision code writes a ViT: the
encoder block wrapped in `nn.remat` with its policy looked up from a config
string (`getattr(jax.checkpoint_policies, name)`), stacked with `nn.scan`,
and a loss `loss(params, images, labels)` over one-hot float labels.

`make_loss(remat_policy)` builds the loss for any policy name (the oracle for
site overrides is this factory with the name changed by hand); the registered
target `loss` uses `REMAT_POLICY`. `int_labels` is the same model with
integer class labels.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

import remat_tui

DEPTH, WIDTH, HEADS, MLP_DIM, PATCH, IMAGE, BATCH, CLASSES = 3, 32, 2, 64, 4, 16, 2, 10
REMAT_POLICY = "nothing_saveable"


class MlpBlock(nn.Module):
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        x = nn.gelu(nn.Dense(self.mlp_dim)(x))
        return nn.Dense(d)(x)


class Encoder1DBlock(nn.Module):
    mlp_dim: int
    num_heads: int

    @nn.compact
    def __call__(self, x, deterministic=True):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y)
        x = x + y
        y = nn.LayerNorm()(x)
        y = MlpBlock(mlp_dim=self.mlp_dim)(y)
        return x + y, None


class Encoder(nn.Module):
    depth: int
    mlp_dim: int
    num_heads: int
    remat_policy: str

    @nn.compact
    def __call__(self, x, deterministic=True):
        block = nn.remat(
            Encoder1DBlock,
            prevent_cse=False,
            static_argnums=(2,),
            policy=getattr(jax.checkpoint_policies, self.remat_policy, None),
        )
        x, _ = nn.scan(
            block,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=nn.broadcast,
            length=self.depth,
        )(name="encoderblock", mlp_dim=self.mlp_dim, num_heads=self.num_heads)(x, deterministic)
        return nn.LayerNorm(name="encoder_norm")(x)


class ViT(nn.Module):
    remat_policy: str = REMAT_POLICY

    @nn.compact
    def __call__(self, images):
        x = nn.Conv(WIDTH, (PATCH, PATCH), strides=(PATCH, PATCH), name="embedding")(images)
        n, h, w, c = x.shape
        x = jnp.reshape(x, (n, h * w, c))
        x = Encoder(DEPTH, MLP_DIM, HEADS, self.remat_policy, name="Transformer")(x)
        return nn.Dense(CLASSES, name="head")(jnp.mean(x, axis=1))


def make_loss(remat_policy: str = REMAT_POLICY, integer_labels: bool = False):
    """The loss of a ViT whose encoder blocks are checkpointed with the policy
    of that name."""
    model = ViT(remat_policy=remat_policy)

    def loss(params, images, labels):
        logits = model.apply({"params": params}, images)
        if integer_labels:
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return optax.softmax_cross_entropy(logits, labels).mean()

    return loss


def example_args(integer_labels: bool = False):
    images = jax.ShapeDtypeStruct((BATCH, IMAGE, IMAGE, 3), jnp.float32)
    params = jax.eval_shape(ViT().init, jax.random.key(0), images)["params"]
    if integer_labels:
        return params, images, jax.ShapeDtypeStruct((BATCH,), jnp.int32)
    return params, images, jax.ShapeDtypeStruct((BATCH, CLASSES), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
int_labels = remat_tui.target(args=lambda: example_args(True), name="int_labels")(
    make_loss(integer_labels=True)
)
