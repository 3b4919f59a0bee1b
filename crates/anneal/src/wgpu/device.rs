//! The wgpu side of the engine that is not the anneal: the adapter chosen
//! (a GPU first; a software one only when asked), a device opened at the
//! adapter's own limits, and wgpu's errors kept for the next call to return.

use std::sync::{Arc, Mutex};

pub use crate::error::WgpuError;

/// Which adapters [`WgpuDevice::open`] may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adapters {
    /// A GPU only (for the automatic choice: a software rasterizer such as
    /// lavapipe or llvmpipe is slower than the CPU engine).
    Hardware,
    /// A GPU when there is one, else a software adapter (a CLI's explicit
    /// choice of wgpu, the tests on lavapipe).
    Any,
}

/// An opened wgpu device, with its adapter's limits.
#[derive(Debug, Clone)]
pub struct WgpuDevice {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pub(super) limits: wgpu::Limits,
    /// The first error wgpu reported outside a call's result.
    errors: Arc<Mutex<Option<String>>>,
}

/// How good an adapter is for the anneal (lower is better); `None`: not
/// one to take under `want`.
fn rank(info: &wgpu::AdapterInfo, want: Adapters) -> Option<u8> {
    use wgpu::DeviceType as T;
    match (info.device_type, want) {
        (T::DiscreteGpu, _) => Some(0),
        (T::IntegratedGpu, _) => Some(1),
        (T::VirtualGpu, _) => Some(2),
        (T::Other, _) => Some(3),
        (T::Cpu, Adapters::Any) => Some(4),
        (T::Cpu, Adapters::Hardware) => None,
    }
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    let software = if info.device_type == wgpu::DeviceType::Cpu {
        ", software"
    } else {
        ""
    };
    format!("{} ({:?}{software})", info.name, info.backend)
}

impl WgpuDevice {
    /// Opens the best adapter `want` allows (a discrete GPU first) with
    /// every limit the adapter has.
    pub fn open(want: Adapters) -> Result<Self, WgpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::PRIMARY;
        desc.flags = wgpu::InstanceFlags::empty();
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
        let best = adapters
            .iter()
            .filter_map(|a| rank(&a.get_info(), want).map(|r| (r, a)))
            .min_by_key(|(r, _)| *r)
            .map(|(_, a)| a);
        let Some(adapter) = best else {
            let found = if adapters.is_empty() {
                "no Vulkan, Metal or DX12 driver found".to_string()
            } else {
                let names: Vec<String> = adapters.iter().map(|a| describe(&a.get_info())).collect();
                format!("only {}", names.join(", "))
            };
            return Err(WgpuError::NoAdapter {
                wanted: match want {
                    Adapters::Hardware => "hardware",
                    Adapters::Any => "usable",
                },
                found,
            });
        };
        let info = adapter.get_info();
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kiln anneal"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| WgpuError::Device {
            adapter: describe(&info),
            message: e.to_string(),
        })?;
        let errors = Arc::new(Mutex::new(None));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = sink.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| e.to_string());
        }));
        Ok(Self {
            device,
            queue,
            info,
            limits,
            errors,
        })
    }

    /// The adapter, as `name (backend)`, with `, software` for a software
    /// one.
    pub fn name(&self) -> String {
        describe(&self.info)
    }

    /// Whether the adapter is a software one (lavapipe, llvmpipe, WARP).
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The largest buffer one binding may see.
    pub(super) fn binding_limit(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// The first error wgpu reported, if any.
    pub(super) fn check(&self) -> Result<(), WgpuError> {
        let slot = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Some(message) => Err(WgpuError::Runtime(message.clone())),
            None => Ok(()),
        }
    }
}
