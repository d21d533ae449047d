//! Jobs as the user gives them and as they run: the parameters from
//! flags or a job file (`fields.rs`, one struct that clap flattens into
//! `iolab run`'s flags and serde reads from TOML, so a flag and its key
//! never drift apart), fio's job files and Vdbench's parameter files
//! translated into them (`fio.rs`, `vdbench.rs`),
//! the checked job specs made of them (`plan.rs`), and each checked
//! against its stack and the stack opened (`prepare.rs`), then run
//! (`execute.rs`); under MPI's ranks, the plan split (`ranks.rs`).

pub mod execute;
pub mod fields;
pub mod fio;
pub mod plan;
pub mod prepare;
pub mod ranks;
pub mod vdbench;

pub use fields::{JobFields, JobFile};
pub use plan::{key_map_spec, load, plan, Plan};
pub use prepare::{LayoutPlan, Prepared};
