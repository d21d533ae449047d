mod frame;
mod id;
mod le;
