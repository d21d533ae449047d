//! `--cpus`: the CPUs a mount's server runs on, as taskset takes them.

/// A CPU list as taskset takes it: numbers and ranges, comma-separated.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("--cpus: '{text}' is not a CPU list; give numbers and ranges such as 0 or 0-1,3");
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) =
            (lo.trim().parse().map_err(|_| bad())?, hi.trim().parse().map_err(|_| bad())?);
        if lo > hi || hi >= libc::CPU_SETSIZE as usize {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    if let Some(&cpu) = cpus.iter().find(|&&c| c >= online) {
        return Err(format!("--cpus: CPU {cpu} is not here; this machine has CPUs 0-{}", online - 1));
    }
    Ok(cpus)
}

/// Restricts this process's threads (and every thread it starts after) to `cpus`.
pub fn pin_to(cpus: &[usize]) -> anyhow::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays inside it
    // (parse_cpus checked each number against CPU_SETSIZE).
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result != 0 {
        return Err(anyhow::anyhow!("--cpus: cannot run on {cpus:?}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_cpus;

    #[test]
    fn a_cpu_list_takes_numbers_and_ranges() {
        assert_eq!(parse_cpus("0"), Ok(vec![0]));
        assert_eq!(parse_cpus("0-0,0"), Ok(vec![0, 0]));
    }

    #[test]
    fn a_cpu_list_that_is_not_one_or_names_a_missing_cpu_is_refused() {
        for bad in ["", "a", "1-0", "0,", "-1"] {
            assert!(parse_cpus(bad).unwrap_err().contains("not a CPU list"), "{bad}");
        }
        assert!(parse_cpus("100000").unwrap_err().contains("not a CPU list"));
        assert!(parse_cpus("1000").unwrap_err().contains("is not here"));
    }
}
