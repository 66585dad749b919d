/* The layer kinds and their rows, listed once: X(KIND, row) makes the enum value MW_LAYER_KIND
 * (model.h's mw_layer_kind) whose row is the mw_layer_ops mw_layer_<row> (layer.h) defined in
 * its family's file under layers/; R(row) is a row that only reads Keras classes into layers of
 * the other kinds (a KerasHub block built from them), with no kind of its own. The order is
 * the order the Keras classes are looked up and listed in messages. A new layer kind is one
 * line here, its family's file and, for a builder others call, the family's header. */
#ifndef MW_WORKER_MODEL_LAYER_LIST_H
#define MW_WORKER_MODEL_LAYER_LIST_H

#define MW_LAYER_LIST(X, R)                                                                        \
    X(CONV2D, conv2d)       /* Conv2D, Conv1D */                                                   \
    X(DWCONV, dwconv)       /* DepthwiseConv2D, and Conv2D with groups = its input channels */     \
    X(SEPCONV, sepconv)     /* SeparableConv2D: depthwise, then a 1x1 convolution */               \
    X(MAXPOOL, maxpool)     /* MaxPooling2D, GlobalMaxPooling2D, the 1-D ones */                   \
    X(FLATTEN, flatten)     /* Flatten, Reshape */                                                 \
    X(DENSE, dense)         /* Dense */                                                            \
    X(EINSUM, einsum)       /* EinsumDense of the equations that are a Dense on the last axis */   \
    X(RELU, relu)           /* ReLU, Activation('relu') */                                         \
    X(RELUX, relux)         /* ReLU with max_value, negative_slope or threshold */                 \
    X(DROPOUT, dropout)     /* inverted dropout while training, identity otherwise */              \
    X(IDENTITY, identity)   /* Activation('linear'), or the final softmax folded into the loss */  \
    X(BATCHNORM, batchnorm) /* axis -1: batch statistics while training, the moving ones else */   \
    X(AVGPOOL, avgpool)     /* AveragePooling2D, and GlobalAveragePooling2D (flat output) */       \
    R(mean)                 /* ops.mean over the positions (Mean) (pooling.c) */                   \
    X(ZEROPAD, zeropad)     /* ZeroPadding2D */                                                    \
    X(ADD, add)             /* Add: the sum of its inputs (equal shapes) */                        \
    X(MULTIPLY, multiply)   /* Multiply: the product of its two inputs */                          \
    X(CONCAT, concat)       /* Concatenate on the channel axis */                                  \
    X(ACT, act)             /* the activation functions of activations.h (act, alpha) */           \
    X(SOFTMAX, softmax)     /* a softmax computed as a layer (not the last one) */                 \
    X(CROP, crop)           /* Cropping2D (pad: the rows and columns cut) */                       \
    X(EMBED, embed)         /* Embedding: token ids (the model's input) -> vectors */              \
    X(LAYERNORM, layernorm) /* LayerNormalization over the last axis (epsilon, gamma, beta) */     \
    X(GROUPNORM, groupnorm) /* GroupNormalization over groups of the channels */                   \
    X(MHA, mha)             /* MultiHeadAttention (mha; inputs query, value and maybe key) */      \
    R(transformer)          /* KerasHub's TransformerEncoder, TransformerDecoder */                \
    R(llama)                /* KerasHub's LlamaTransformerDecoder (layers/llama.c) */              \
    R(gemma)                /* KerasHub's GemmaDecoderBlock (layers/gemma.c) */                    \
    X(CLSTOKEN, clstoken)   /* a learned row before a sequence's steps (ViT's class token) */      \
    R(vit)                  /* KerasHub's ViTPatchingAndEmbedding, ViTEncoder (layers/vit.c) */    \
    X(POSEMB, posemb)       /* KerasHub's PositionEmbedding: a table's first T rows */             \
    X(REVEMB, revemb)       /* ReversibleEmbedding's reverse call: logits from a tied table */     \
    X(ROPE, rope)           /* KerasHub's RotaryEmbedding: features rotated by the position */     \
    X(RESCALE, rescale)     /* Rescaling as a layer: x * scale + offset */                         \
    X(NORMALIZE, normalize) /* Normalization with its statistics in its weights (adapted) */       \
    X(CONV2DT, conv2d_tr)   /* Conv2DTranspose (layers/upsample.c) */                              \
    X(UPSAMPLE, upsample)   /* UpSampling2D, nearest or bilinear */                                \
    X(RMSNORM, rmsnorm)     /* RMSNormalization, LayerNormalization(rms_scaling=True) */           \
    R(rmsnorm_llama)        /* KerasHub's LlamaLayerNorm (layers/rmsnorm.c) */                     \
    R(rmsnorm_gemma)        /* KerasHub's Gemma RMSNormalization (layers/rmsnorm.c) */             \
    X(LAYERSCALE, layerscale) /* keras.applications' LayerScale: x times a per-channel gamma */    \
    R(stochdepth)             /* keras.applications' StochasticDepth (rate 0: an identity) */      \
    R(customscale)            /* keras.applications' CustomScaleLayer (an Add, scaled) */          \
    X(INPUT, input)           /* a named input's InputLayer: its part of the input's row */

#endif
