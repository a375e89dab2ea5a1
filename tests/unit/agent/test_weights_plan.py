"""Where a source's weights come from: the node itself, a URL, or the mirror, and which
file llama.cpp loads out of a repository. Pure: no network, `exists` passed in."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmgw.agent.weights import RemoteFile, pick_gguf, plan_weights
from llmgw.catalog.parts import Origin, OriginFile
from llmgw.errors import WeightsError

W = Path("/var/lib/llmgw/agent/weights")
MIRROR = "http://mirror.internal:8081/"
SHA = "ab" * 32


def _nothing_here(path: str) -> bool:
    return False


def test_a_path_on_the_node_is_used_as_it_is(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    plan = plan_weights(str(model), weights_dir=W, mirror_url=MIRROR)
    assert plan.local == model
    assert not plan.fetches
    assert plan_weights(str(tmp_path), weights_dir=W).local == tmp_path


def test_a_path_not_on_the_node_and_no_mirror_says_what_to_do() -> None:
    with pytest.raises(
        WeightsError, match=r"not on this node.*copy them here, give a URL, or set offline\.mirror"
    ):
        plan_weights("/models/llama/model.gguf", weights_dir=W, exists=_nothing_here)


def test_a_mirror_path_not_on_the_node_is_fetched_from_the_mirror() -> None:
    plan = plan_weights("/models/llama/q4.gguf", weights_dir=W, mirror_url=MIRROR, exists=_nothing_here)
    assert plan.files == (RemoteFile(url="http://mirror.internal:8081/models/llama/q4.gguf", name="q4.gguf"),)
    assert plan.directory == W / "models--llama"
    assert plan.single_file


def test_a_repository_is_fetched_file_by_file_as_its_origin_lists_them() -> None:
    origin = Origin(
        repo="Qwen/Qwen3-0.6B",
        files=(
            OriginFile(path="config.json", sha256="", bytes=10),
            OriginFile(path="model.safetensors", sha256=SHA.upper(), bytes=1000),
        ),
    )
    plan = plan_weights(
        "Qwen/Qwen3-0.6B", weights_dir=W, mirror_url=MIRROR, origin=origin, exists=_nothing_here
    )
    assert plan.directory == W / "Qwen--Qwen3-0.6B"
    assert [f.url for f in plan.files] == [
        "http://mirror.internal:8081/Qwen/Qwen3-0.6B/config.json",
        "http://mirror.internal:8081/Qwen/Qwen3-0.6B/model.safetensors",
    ]
    assert plan.files[1].sha256 == SHA, "checksums are compared in lower case"
    assert plan.files[1].size_bytes == 1000
    assert not plan.single_file


def test_hf_prefix_always_means_the_registry() -> None:
    plan = plan_weights("hf:a/b/sub/m.gguf", weights_dir=W, mirror_url=MIRROR, exists=lambda _: True)
    assert plan.fetches
    assert plan.files[0].url == "http://mirror.internal:8081/a/b/sub/m.gguf"
    assert plan.files[0].name == "sub/m.gguf"


def test_a_repository_without_a_file_list_names_the_fix() -> None:
    with pytest.raises(WeightsError, match=r"add origin\.files, or name the one file"):
        plan_weights("Qwen/Qwen3-0.6B", weights_dir=W, mirror_url=MIRROR, exists=_nothing_here)


def test_a_bare_name_is_not_a_repository() -> None:
    with pytest.raises(WeightsError, match="give owner/name"):
        plan_weights("llama", weights_dir=W, mirror_url=MIRROR, exists=_nothing_here)


def test_a_huggingface_file_url_goes_through_the_mirror_when_there_is_one() -> None:
    url = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/resolve/main/smollm2-q8.gguf"
    through = plan_weights(url, weights_dir=W, mirror_url=MIRROR)
    assert (
        through.files[0].url
        == "http://mirror.internal:8081/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2-q8.gguf"
    )
    direct = plan_weights(url, weights_dir=W)
    assert direct.files[0].url == url
    assert direct.directory == W / "huggingface.co--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF--resolve--main"


def test_a_url_takes_its_checksum_from_the_origin() -> None:
    origin = Origin(repo="a/b", files=(OriginFile(path="dir/m.gguf", sha256=SHA, bytes=5),))
    plan = plan_weights("http://127.0.0.1:9/files/m.gguf", weights_dir=W, origin=origin)
    assert plan.files == (
        RemoteFile(url="http://127.0.0.1:9/files/m.gguf", name="m.gguf", sha256=SHA, size_bytes=5),
    )
    assert plan.directory == W / "127.0.0.1_9--files"


def test_a_url_to_a_directory_is_refused() -> None:
    with pytest.raises(WeightsError, match="names one file"):
        plan_weights("http://127.0.0.1:9/files/", weights_dir=W)


def test_files_cannot_land_outside_the_weights_directory() -> None:
    origin = Origin(repo="a/b", files=(OriginFile(path="../../etc/cron.d/x"),))
    with pytest.raises(WeightsError, match="outside the weights directory"):
        plan_weights("a/b", weights_dir=W, mirror_url=MIRROR, origin=origin, exists=_nothing_here)


def test_no_source_is_refused() -> None:
    with pytest.raises(WeightsError, match="names no weights"):
        plan_weights("  ", weights_dir=W)


def test_llamacpp_loads_the_one_gguf_or_the_first_shard() -> None:
    assert pick_gguf(["config.json", "m-q4.gguf", "mmproj-m.gguf"], "s") == "m-q4.gguf"
    shards = ["m-00002-of-00003.gguf", "m-00001-of-00003.gguf", "m-00003-of-00003.gguf"]
    assert pick_gguf(shards, "s") == "m-00001-of-00003.gguf"


def test_several_or_no_ggufs_are_refused() -> None:
    with pytest.raises(WeightsError, match=r"2 \.gguf files: name the one"):
        pick_gguf(["a.gguf", "b.gguf"], "s")
    with pytest.raises(WeightsError, match=r"no \.gguf"):
        pick_gguf(["model.safetensors"], "s")
