mod cli;
mod jobfile;
mod run;
