"""``gluon.data``: datasets, samplers and ``DataLoader``, as MXNet 1.9.1's."""
from recio.mx.gluon.data import vision
from recio.mx.gluon.data.dataloader import DataLoader, default_batchify_fn
from recio.mx.gluon.data.dataset import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset
from recio.mx.gluon.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset", "Sampler",
           "SequentialSampler", "RandomSampler", "BatchSampler", "DataLoader",
           "default_batchify_fn", "vision"]
