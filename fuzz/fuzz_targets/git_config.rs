//! The git-config reader on arbitrary config files (as the global config): never a
//! panic; problems become warnings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2::Settings;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("trace2-fuzz-config-{}", std::process::id()));
    std::fs::write(&path, data).expect("write the config file");
    let global = path.display().to_string();
    let env = |key: &str| match key {
        "GIT_CONFIG_GLOBAL" => Some(global.clone()),
        "GIT_CONFIG_NOSYSTEM" => Some("1".to_owned()),
        _ => None,
    };
    let settings = Settings::load(&env);
    let _ = settings.def_param_listing();
});
