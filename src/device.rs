//! Where a fit runs: the CPU or a CUDA GPU.
//!
//! [`Device`] is what the user asks for (default [`Device::Auto`]); [`probe`] says which GPUs
//! this process can use, or why none; [`resolve`] turns a request into a [`Placement`] with a
//! human-readable reason.
//!
//! Rules:
//! - [`Device::Auto`] uses GPU 0 when the build has the `cuda` feature, the NVIDIA driver
//!   library can be loaded, a device of compute capability 8.0 or newer is present, the driver
//!   is new enough for the embedded kernels, and the model is one the GPU path covers
//!   (random features in f32 with DBCD-TR). Otherwise it falls back to the CPU.
//! - [`Device::Cuda`] fails with [`JokerError::Device`] when any of these does not hold.
//! - [`Device::Cpu`] always runs on the CPU.
//!
//! Logging: the library never prints. The reason for the placement (including why
//! [`Device::Auto`] fell back to the CPU) is recorded once per fit in
//! [`TrainingInfo::device`](crate::model::TrainingInfo::device), and the command-line program
//! prints it. The probe runs once per process (the result is cached).
//!
//! To keep [`Device::Auto`] on the CPU on a machine with a GPU, hide the devices from the
//! driver (`CUDA_VISIBLE_DEVICES=` in the environment) or ask for [`Device::Cpu`].
//!
//! Nothing here panics: cudarc panics when the driver library is missing, so the probe checks
//! for the library first and also runs behind `catch_unwind`.

use std::fmt;
use std::sync::OnceLock;

use crate::error::{JokerError, Result};

/// The device a fit should run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// A GPU when one is usable and the model is supported there, else the CPU (the reason is
    /// recorded in the model's training info).
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA device with this ordinal; an error if it cannot be used.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Auto => write!(f, "auto"),
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = JokerError;

    /// Parses `auto`, `cpu`, `cuda` (device 0) or `cuda:N`.
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(Device::Auto),
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => t
                .strip_prefix("cuda:")
                .or_else(|| t.strip_prefix("gpu:"))
                .and_then(|i| i.parse::<usize>().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    crate::error::invalid(
                        "device",
                        format!("`{s}` is not a device: use auto, cpu, cuda or cuda:N"),
                    )
                }),
        }
    }
}

/// One usable GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// CUDA ordinal.
    pub index: usize,
    /// Device name as the driver reports it (for example "NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
}

/// What this process can use, found once by [`probe`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The usable GPUs, by ordinal (only devices the embedded kernels can run on).
    pub devices: Vec<GpuInfo>,
    /// Why no GPU (or not every device) can be used; `None` when every device is usable.
    pub note: Option<String>,
}

impl Probe {
    /// Whether at least one GPU is usable.
    pub fn available(&self) -> bool {
        !self.devices.is_empty()
    }
    /// The reason no GPU is usable (empty when one is).
    pub fn reason(&self) -> String {
        if self.available() {
            String::new()
        } else {
            self.note
                .clone()
                .unwrap_or_else(|| "no CUDA device found".into())
        }
    }
}

/// Minimum compute capability of the embedded kernels (`sm_80` code, `compute_80` PTX).
pub const MIN_COMPUTE_CAPABILITY: (i32, i32) = (8, 0);

/// Minimum driver API version (`cuDriverGetVersion`) for the embedded kernels: CUDA 12.0, the
/// R525 drivers (525.60.13 or newer on Linux). The fat binaries hold sm_80 and sm_90 code built
/// by CUDA 12.6, which any CUDA 12 driver runs (minor version compatibility), and compute_80
/// PTX of ISA 8.5 for GPUs newer than sm_90, which needs a CUDA 12.5 driver (R555) to
/// JIT-compile; every driver that supports such a GPU (R570 or newer) is newer than that.
pub const MIN_DRIVER_VERSION: i32 = 12000;

static PROBE: OnceLock<Probe> = OnceLock::new();

/// Which usable GPU [`Device::Auto`] takes in this process ([`spread_auto`]).
static AUTO_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Makes [`Device::Auto`] in this process take the usable GPU at position `slot` modulo their
/// number instead of the first. A rank of a distributed job passes its place among the ranks
/// on its machine, so that the ranks spread over the machine's GPUs (more ranks than GPUs
/// share them in turn).
pub fn spread_auto(slot: usize) {
    AUTO_SLOT.store(slot, std::sync::atomic::Ordering::Relaxed);
}

/// The GPU [`Device::Auto`] takes from `probe` with [`spread_auto`]'s `slot`.
pub fn auto_gpu(probe: &Probe, slot: usize) -> Option<&GpuInfo> {
    let n = probe.devices.len();
    (n > 0).then(|| &probe.devices[slot % n])
}

/// Whether this process has queried the CUDA driver ([`probe`]): fits on [`Device::Cpu`]
/// never do.
pub fn probed() -> bool {
    PROBE.get().is_some()
}

/// The usable GPUs, or why there are none. Probed once per process; never panics.
pub fn probe() -> &'static Probe {
    PROBE.get_or_init(|| {
        std::panic::catch_unwind(probe_now).unwrap_or_else(|_| Probe {
            devices: Vec::new(),
            note: Some("the CUDA driver query panicked; using the CPU".into()),
        })
    })
}

#[cfg(not(feature = "cuda"))]
fn probe_now() -> Probe {
    Probe {
        devices: Vec::new(),
        note: Some("this build of joker has no CUDA support (the `cuda` feature is off)".into()),
    }
}

#[cfg(feature = "cuda")]
fn probe_now() -> Probe {
    use cudarc::driver::{result, sys};
    let none = |why: String| Probe {
        devices: Vec::new(),
        note: Some(why),
    };
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its usual names
    // and drops the handle; it has no preconditions.
    if !unsafe { sys::is_culib_present() } {
        return none("no NVIDIA driver library (libcuda.so) could be loaded".into());
    }
    if let Err(e) = result::init() {
        return none(format!("the CUDA driver did not initialise: {e}"));
    }
    let mut version = 0i32;
    // SAFETY: the driver library is loaded (checked above) and `version` is a valid pointer
    // to one writable int for the duration of the call.
    let rc = unsafe { sys::cuDriverGetVersion(&mut version) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return none(format!("cuDriverGetVersion failed: {rc:?}"));
    }
    if version < MIN_DRIVER_VERSION {
        return none(format!(
            "the NVIDIA driver supports CUDA {}.{}, the embedded kernels need CUDA {}.{} (driver R525 or newer)",
            version / 1000,
            (version % 1000) / 10,
            MIN_DRIVER_VERSION / 1000,
            (MIN_DRIVER_VERSION % 1000) / 10
        ));
    }
    let count = match result::device::get_count() {
        Ok(c) => c.max(0) as usize,
        Err(e) => return none(format!("no CUDA device: {e}")),
    };
    if count == 0 {
        return none("the NVIDIA driver is present but reports no CUDA device".into());
    }
    let mut devices = Vec::new();
    let mut skipped = Vec::new();
    for index in 0..count {
        match query_device(index) {
            Ok(info) if info.compute_capability >= MIN_COMPUTE_CAPABILITY => devices.push(info),
            Ok(info) => skipped.push(format!(
                "device {index} ({}) has compute capability {}.{}, joker needs {}.{} or newer",
                info.name,
                info.compute_capability.0,
                info.compute_capability.1,
                MIN_COMPUTE_CAPABILITY.0,
                MIN_COMPUTE_CAPABILITY.1
            )),
            Err(e) => skipped.push(format!("device {index}: {e}")),
        }
    }
    // Each usable device keeps its own CUDA ordinal, so `Cuda(i)` always means ordinal i.
    Probe {
        devices,
        note: (!skipped.is_empty()).then(|| skipped.join("; ")),
    }
}

#[cfg(feature = "cuda")]
fn query_device(index: usize) -> std::result::Result<GpuInfo, String> {
    use cudarc::driver::{result, sys};
    let dev = result::device::get(index as i32).map_err(|e| e.to_string())?;
    let name = result::device::get_name(dev).map_err(|e| e.to_string())?;
    // SAFETY: `dev` is a valid device handle returned by the driver just above.
    let total_memory = unsafe { result::device::total_mem(dev) }.map_err(|e| e.to_string())?;
    let attr = |a| {
        // SAFETY: `dev` is a valid device handle and `a` a valid attribute enum value.
        unsafe { result::device::get_attribute(dev, a) }.map_err(|e| e.to_string())
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(GpuInfo {
        index,
        name,
        total_memory,
        compute_capability: (major, minor),
    })
}

/// Where a fit actually runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The CPU backend.
    Cpu,
    /// The CUDA backend on this ordinal.
    Cuda(usize),
}

/// A resolved device request: the placement and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Where the fit runs.
    pub placement: Placement,
    /// Why, in words (recorded in the model's training info).
    pub reason: String,
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.placement {
            Placement::Cpu => write!(f, "cpu ({})", self.reason),
            Placement::Cuda(i) => write!(f, "cuda:{i} ({})", self.reason),
        }
    }
}

/// Resolves a request against the probe. `supported` is `Ok` when the model can run on the
/// GPU, or the reason it cannot (for example "the CUDA kernels compute in f32; ...").
///
/// [`Device::Auto`] never fails; [`Device::Cuda`] fails with [`JokerError::Device`] naming
/// the reason when it cannot be honoured.
/// [`Device::Cpu`] never queries the driver.
pub fn resolve(requested: Device, supported: std::result::Result<(), String>) -> Result<Resolved> {
    if requested == Device::Cpu {
        return Ok(Resolved {
            placement: Placement::Cpu,
            reason: "requested".into(),
        });
    }
    resolve_with(probe(), requested, supported)
}

/// [`resolve`] against a given probe result (for tests and callers with their own probe).
pub fn resolve_with(
    probe: &Probe,
    requested: Device,
    supported: std::result::Result<(), String>,
) -> Result<Resolved> {
    let cpu = |reason: String| {
        Ok(Resolved {
            placement: Placement::Cpu,
            reason,
        })
    };
    match requested {
        Device::Cpu => cpu("requested".into()),
        Device::Auto => {
            if let Err(why) = supported {
                return cpu(format!("auto: {why}"));
            }
            let slot = AUTO_SLOT.load(std::sync::atomic::Ordering::Relaxed);
            match auto_gpu(probe, slot) {
                Some(g) => Ok(Resolved {
                    placement: Placement::Cuda(g.index),
                    reason: format!("auto: {}", g.name),
                }),
                None => cpu(format!("auto: no usable GPU: {}", probe.reason())),
            }
        }
        Device::Cuda(i) => {
            if let Err(why) = supported {
                return Err(JokerError::Device(format!(
                    "cuda:{i} was requested but {why}; use Device::Cpu or Device::Auto"
                )));
            }
            match probe.devices.iter().find(|g| g.index == i) {
                Some(g) => Ok(Resolved {
                    placement: Placement::Cuda(i),
                    reason: format!("requested: {}", g.name),
                }),
                None if probe.available() => Err(JokerError::Device(format!(
                    "cuda:{i} was requested but the usable CUDA devices are {:?}{}",
                    probe.devices.iter().map(|g| g.index).collect::<Vec<_>>(),
                    probe
                        .note
                        .as_ref()
                        .map_or(String::new(), |n| format!(" ({n})"))
                ))),
                None => Err(JokerError::Device(format!(
                    "cuda:{i} was requested but no GPU can be used: {}",
                    probe.reason()
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Probe {
        Probe {
            devices: Vec::new(),
            note: Some("no NVIDIA driver library (libcuda.so) could be loaded".into()),
        }
    }

    fn one() -> Probe {
        Probe {
            devices: vec![GpuInfo {
                index: 0,
                name: "Test GPU".into(),
                total_memory: 1 << 30,
                compute_capability: (9, 0),
            }],
            note: None,
        }
    }

    #[test]
    fn parse_and_display_round_trip() {
        for d in [Device::Auto, Device::Cpu, Device::Cuda(0), Device::Cuda(3)] {
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
        }
        assert_eq!("CUDA".parse::<Device>().unwrap(), Device::Cuda(0));
        assert!("cuda:x".parse::<Device>().is_err());
        assert!("tpu".parse::<Device>().is_err());
        assert_eq!(Device::default(), Device::Auto);
    }

    #[test]
    fn auto_falls_back_with_a_reason() {
        let r = resolve_with(&none(), Device::Auto, Ok(())).unwrap();
        assert_eq!(r.placement, Placement::Cpu);
        assert!(r.reason.contains("libcuda"), "{}", r.reason);
        let r = resolve_with(
            &one(),
            Device::Auto,
            Err("exact kernels run on the CPU".into()),
        )
        .unwrap();
        assert_eq!(r.placement, Placement::Cpu);
        assert!(r.reason.contains("exact kernels"), "{}", r.reason);
        let r = resolve_with(&one(), Device::Auto, Ok(())).unwrap();
        assert_eq!(r.placement, Placement::Cuda(0));
        assert!(r.to_string().starts_with("cuda:0"), "{r}");
    }

    /// Ranks on one machine take its usable GPUs in turn (ordinals as the probe lists them,
    /// which may skip unusable devices).
    #[test]
    fn auto_spreads_ranks_over_the_usable_gpus() {
        let three = Probe {
            devices: [0, 2, 3]
                .map(|index| GpuInfo {
                    index,
                    ..one().devices[0].clone()
                })
                .to_vec(),
            note: None,
        };
        let picks: Vec<usize> = (0..7)
            .map(|slot| auto_gpu(&three, slot).unwrap().index)
            .collect();
        assert_eq!(picks, [0, 2, 3, 0, 2, 3, 0]);
        assert_eq!(auto_gpu(&one(), 5).unwrap().index, 0);
        assert!(auto_gpu(&none(), 1).is_none());
    }

    #[test]
    fn explicit_cuda_fails_clearly() {
        let e = resolve_with(&none(), Device::Cuda(0), Ok(())).unwrap_err();
        assert!(matches!(e, JokerError::Device(_)));
        assert!(e.to_string().contains("libcuda"), "{e}");
        let e = resolve_with(&one(), Device::Cuda(2), Ok(())).unwrap_err();
        assert!(e.to_string().contains("[0]"), "{e}");
        let e = resolve_with(&one(), Device::Cuda(0), Err("f64 is CPU only".into())).unwrap_err();
        assert!(e.to_string().contains("f64 is CPU only"), "{e}");
        assert_eq!(
            resolve_with(&one(), Device::Cuda(0), Ok(()))
                .unwrap()
                .placement,
            Placement::Cuda(0)
        );
        assert_eq!(
            resolve_with(&one(), Device::Cpu, Ok(())).unwrap().placement,
            Placement::Cpu
        );
    }

    /// The real probe on this machine: never panics, and is consistent.
    #[test]
    fn probe_is_consistent() {
        let p = probe();
        assert_eq!(p.available(), !p.devices.is_empty());
        if !p.available() {
            assert!(!p.reason().is_empty());
            let r = resolve(Device::Auto, Ok(())).unwrap();
            assert_eq!(r.placement, Placement::Cpu);
            assert!(matches!(
                resolve(Device::Cuda(0), Ok(())),
                Err(JokerError::Device(_))
            ));
        }
    }
}
