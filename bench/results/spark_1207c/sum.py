import json,glob,statistics,sys,re
rows={}
for f in sorted(glob.glob(sys.argv[1] if len(sys.argv)>1 else '*.json')):
    try: d=json.load(open(f))
    except Exception as e: continue
    m=re.search(r'-(kg\w+)-(\d+)\.json',f); lab,pair=m.group(1),int(m.group(2))
    per=d['steady_cpu_total']/d['steady_batches']
    parts={k:round(sum(v)/d['steady_batches'],3) for k,v in d['steady_cpu_user_sys'].items()}
    rows.setdefault(pair,{})[lab]=(per,parts)
labs=sorted({l for r in rows.values() for l in r})
for p in sorted(rows): print(p, {l:(round(rows[p][l][0],3)) for l in rows[p]})
for l in labs:
    v=[rows[p][l][0] for p in rows if l in rows[p]]
    print(l,'median',round(statistics.median(v),3), [round(x,3) for x in sorted(v)])
    for k in rows[1][l][1]:
        print('   ',k, round(statistics.median([rows[p][l][1][k] for p in rows if l in rows[p]]),3))
