"A user's own anticipation network in a few lines, outside the package: `hoi-audit audit DATA --architecture tests/user_model.py:make_model`."
import torch
from torch import nn

class BagOfInputs(nn.Module):
    "Each input embedded and averaged over its tokens, the averages summed, one hidden layer, action logits."
    def __init__(self, shapes, n_classes, d=32):
        super().__init__()
        self.video = nn.Linear(shapes["video"][-1], d) if "video" in shapes else None
        self.history = nn.Embedding(n_classes + 1, d, padding_idx=0) if "history" in shapes else None
        self.vectors = nn.ModuleDict({k: nn.Linear(shapes[k][0], d) for k in ("state", "elapsed_fraction") if k in shapes})
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, n_classes))

    def forward(self, video=None, history=None, **vectors):
        parts = [self.vectors[k](v) for k, v in vectors.items()]
        if video is not None: parts.append(self.video(video).mean(1))
        if history is not None: parts.append(self.history(history)[:, -1] + self.history(history).mean(1))  # latest action, and the bag
        return self.head(sum(parts))

def make_model(shapes, n_classes, seed):
    "The factory the audit calls: the condition's input shapes, the number of classes, the seed."
    torch.manual_seed(seed)
    return BagOfInputs(shapes, n_classes)

def wrong_width(shapes, n_classes, seed):
    "Breaks the contract: one logit too few."
    model = BagOfInputs(shapes, n_classes)
    model.head[-1] = nn.Linear(32, n_classes - 1)
    return model
