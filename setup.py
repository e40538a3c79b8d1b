# The nbdev 2 setup.py: every package fact lives in settings.ini.
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

for key in 'version description keywords author author_email'.split():
    assert key in cfg, f"settings.ini is missing the key {key!r}"

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = {'1': '1 - Planning', '2': '2 - Pre-Alpha', '3': '3 - Alpha', '4': '4 - Beta', '5': '5 - Production/Stable'}
py_versions = '3.10 3.11 3.12 3.13'.split()

lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
min_python = cfg['min_python']
requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'].replace('_', '-'),
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[cfg['status']],
                 'Intended Audience :: ' + cfg['audience'],
                 'Natural Language :: ' + cfg['language']]
                + ['Programming Language :: Python :: ' + v for v in py_versions[py_versions.index(min_python):]]
                + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    packages=setuptools.find_namespace_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*'], exclude=['*.__pycache__']),
    include_package_data=True,
    # the real labels (segment tables, splits, mappings, provenance): procedural.SHIPPED_LABELS; their folders hold no .py files,
    # hence find_namespace_packages (find_packages would warn that they 'would be ignored')
    # presets.toml: every preset's settings, read by presets.read_presets (see nbs/12b_presets.ipynb)
    package_data={cfg['lib_path']: ['data/labels/*/*', 'presets.toml']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements},
    python_requires='>=' + min_python,
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': console_scripts, 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    version=cfg['version'],
    description=cfg['description'],
    keywords=cfg['keywords'],
    author=cfg['author'],
    author_email=cfg['author_email'],
)
