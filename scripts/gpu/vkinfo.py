#!/usr/bin/env python3
"""The Vulkan physical devices the loader offers, as JSON on stdout (scripts/gpu/run.sh).

onnxruntime-node does not expose the adapter Dawn picked, so the GPU measurement lists what Dawn
picks from: vkEnumeratePhysicalDevices + vkGetPhysicalDeviceProperties through ctypes (no Vulkan
SDK, no compiler needed on the GPU machine), under the same environment (VK_DRIVER_FILES, ...)
the WebGPU steps run with. Never fails: an error is reported in the JSON.
"""

import ctypes
import json
import sys

TYPES = {0: "other", 1: "integrated-gpu", 2: "discrete-gpu", 3: "virtual-gpu", 4: "cpu"}


class AppInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class InstanceInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(AppInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


def version(v):
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def devices():
    vk = ctypes.CDLL("libvulkan.so.1")
    app = AppInfo(0, None, b"flowgrpo-vkinfo", 1, b"none", 0, (1 << 22) | (1 << 12))
    info = InstanceInfo(1, None, 0, ctypes.pointer(app), 0, None, 0, None)
    instance = ctypes.c_void_p()
    rc = vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if rc != 0:
        raise RuntimeError(f"vkCreateInstance returned {rc} (no Vulkan driver found?)")
    try:
        count = ctypes.c_uint32(0)
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        out = []
        for h in handles[: count.value]:
            # VkPhysicalDeviceProperties: 5 uint32 (api, driver, vendor, device, type), then
            # deviceName[256]; the limits that follow are not read (the buffer is oversized).
            props = ctypes.create_string_buffer(4096)
            vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(h), props)
            api, driver, vendor, device, kind = (
                int.from_bytes(props.raw[i * 4 : i * 4 + 4], "little") for i in range(5)
            )
            name = props.raw[20:276].split(b"\0", 1)[0].decode("utf-8", "replace")
            out.append(
                {
                    "name": name,
                    "vendorId": vendor,
                    "deviceId": device,
                    "type": TYPES.get(kind, "other"),
                    "apiVersion": version(api),
                    "driverVersion": driver,
                }
            )
        return out
    finally:
        vk.vkDestroyInstance(instance, None)


def main():
    try:
        result = {"devices": devices()}
    except Exception as e:  # noqa: BLE001 - reported, never raised: the run goes on
        result = {"devices": [], "error": f"{type(e).__name__}: {e}"}
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
