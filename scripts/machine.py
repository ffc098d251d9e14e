"""What the benchmark scripts record about the machine they ran on."""
import platform


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), as RESULTS records it beside every figure."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
